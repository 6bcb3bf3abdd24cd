"""The fuzz checks themselves can fail: each is shown catching a core that breaks its rule
(deliberately broken stand-ins; the real cores pass, see the other test files). And the seed
corpus is what the transcripts say.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from jobwire._events import NEED_DATA
from jobwire.errors import RemoteProtocolError
from qless_client._resp import Connection

from .harness import CORPUS, RESP_CAPS, RESP_CLIENT, FuzzFailure, Role, check, resp_tree, split
from .make_corpus import transcript_pairs


class Lines:
    """A tiny line reader: one event per ``\\n``-terminated line; a line starting with ``!`` is
    a protocol error."""

    def __init__(self) -> None:
        self.buffer = b""
        self.eof = False
        self.error: Exception | None = None

    def receive_data(self, data: bytes) -> None:
        self.buffer += data
        self.eof = self.eof or not data

    def next_event(self) -> Any:
        if self.error:
            raise self.error
        if self.buffer.startswith(b"!"):
            self.error = RemoteProtocolError("!")
            raise self.error
        line, sep, rest = self.buffer.partition(b"\n")
        if not sep:
            return NEED_DATA
        self.buffer = rest
        return line


def role(core: type[Any], **kwargs: Any) -> Role:
    options: dict[str, Any] = {
        "name": "test", "feeds_on": "client", "make": lambda context: core(),
        "buffered": lambda c: len(c.buffer), "bound": 100, "event_types": (bytes,),
    }
    options.update(kwargs)
    return Role(**options)


def test_a_sound_core_passes() -> None:
    outcome = check(role(Lines), b"a\nbc\n!", cuts=[split(b"a\nbc\n!", [3])])
    assert outcome.events == ("bytes:b'a'", "bytes:b'bc'")
    assert outcome.error is RemoteProtocolError


def test_another_exception_escapes() -> None:
    class Crashes(Lines):
        def next_event(self) -> Any:
            if self.buffer.startswith(b"?"):
                raise IndexError("bug")
            return super().next_event()

    with pytest.raises(IndexError):
        check(role(Crashes), b"a\n?")


def test_events_that_depend_on_the_chunking_fail() -> None:
    class PerChunk(Lines):
        def next_event(self) -> Any:  # hands out whatever is buffered: chunk-dependent
            if not self.buffer:
                return NEED_DATA
            data, self.buffer = self.buffer, b""
            return data

    with pytest.raises(FuzzFailure, match="byte by byte"):
        check(role(PerChunk), b"ab")


def test_a_buffer_past_its_cap_fails() -> None:
    with pytest.raises(FuzzFailure, match="buffered at NEED_DATA"):
        check(role(Lines), b"x" * 101)


def test_endless_events_fail() -> None:
    class Endless(Lines):
        def next_event(self) -> Any:
            return b"again"

    with pytest.raises(FuzzFailure, match="without needing data"):
        check(role(Endless), b"a")


def test_a_poisoned_core_must_raise_again() -> None:
    class Forgets(Lines):
        def next_event(self) -> Any:
            try:
                return super().next_event()
            except RemoteProtocolError:
                self.buffer = b""
                self.error = None
                raise

    with pytest.raises(FuzzFailure, match="poisoned"):
        check(role(Forgets), b"!")


def test_a_role_documented_never_to_raise_fails_when_it_does() -> None:
    with pytest.raises(FuzzFailure, match="documented never to"):
        check(role(Lines, may_raise=False), b"!")


def test_an_event_of_a_foreign_type_fails() -> None:
    with pytest.raises(FuzzFailure, match="returned"):
        check(role(Lines, event_types=(str,)), b"a\n")


@pytest.mark.parametrize("protocol", ["beanstalk", "gearman", "workq"])
def test_the_corpus_is_the_transcripts(protocol: str) -> None:
    # make_corpus.py writes one .client/.server pair per transcript line; rerun it if this fails.
    want = {f"{stem}.{half}": data for stem, sent, got in transcript_pairs(protocol)
            for half, data in (("client", sent), ("server", got))}
    have = {p.name: p.read_bytes() for p in (CORPUS / protocol).iterdir()}
    assert have == want


def test_a_resp_reply_over_its_totals_fails() -> None:
    # A RESP core without the totals of one reply (max_reply_items, max_reply_bytes: as it was
    # before they existed) reads 64 x 64 x 64 empty sets as one reply; the checks count them.
    uncapped = dict(RESP_CAPS, max_reply_items=1 << 40, max_reply_bytes=1 << 40)
    role = dataclasses.replace(RESP_CLIENT, make=lambda context: _pinged(Connection(**uncapped)))
    data = resp_tree(b"~0\r\n", 64, 3)
    with pytest.raises(FuzzFailure, match="max_reply_items"):
        check(role, data, cuts=[split(data, [5, 4000, 70000])], bytewise_limit=0)
    value = b"$4000\r\n" + b"x" * 4000 + b"\r\n"
    data = b"*4\r\n" + value * 4  # 16 KiB of strings: only the whole reply is checked
    with pytest.raises(FuzzFailure, match="max_reply_bytes"):
        check(role, data, bytewise_limit=0)


def _pinged(core: Any) -> Any:
    core.send(["PING"])
    return core
