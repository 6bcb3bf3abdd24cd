"""Hypothesis strategies for the fuzz tests: corpus entries and their mutations, token soups,
oversized inputs, chunkings; and :func:`fuzz_settings`, the settings of the ``jobwire-fuzz``
profile (registered in ``conftest.py``, applied per test, never loaded globally).

Mutations work on real-server bytes (``corpus/<protocol>/``), the way a coverage-guided fuzzer
starts (:func:`harness.mutate`, which the long fuzzer uses too): flip a bit, overwrite a byte
with one that matters to these protocols (CR, LF, space, NUL, a digit, a sign), insert or delete
a run, truncate, repeat a slice, splice in part of another entry. Token soups join pieces cut
from the corpus (words, numbers, line ends) in any order, which reaches the parsers' branches
faster than random bytes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from hypothesis import settings
from hypothesis import strategies as st

from .harness import Entry, load_corpus, mutate, split

__all__ = [
    "chunkings",
    "corpus_entries",
    "fuzz_settings",
    "mutated",
    "oversized",
    "requests",
    "scaled",
    "token_soup",
]

F = TypeVar("F", bound=Callable[..., Any])

PROFILE = "jobwire-fuzz"


def scaled(ci_examples: int) -> int:
    """``ci_examples`` in the ``ci`` profile, the same share of the loaded profile's count in
    any other (``dev``: a sixth), times ``JOBWIRE_FUZZ_SCALE`` (default 1)."""
    share = settings().max_examples / settings.get_profile("ci").max_examples
    return max(1, round(ci_examples * share * float(os.environ.get("JOBWIRE_FUZZ_SCALE", "1"))))


def fuzz_settings(ci_examples: int) -> Callable[[F], F]:
    """The ``jobwire-fuzz`` profile (registered by ``conftest.py``) with :func:`scaled`
    ``(ci_examples)`` examples: the fuzz tests' counts differ, each sized to what one example
    costs (a few KiB fed byte by byte against a short token), relative to the loaded profile."""
    return settings(settings.get_profile(PROFILE), max_examples=scaled(ci_examples))


def corpus_entries(protocol: str) -> st.SearchStrategy[Entry]:
    return st.sampled_from(load_corpus(protocol))


def _tokens(protocol: str) -> list[bytes]:
    """Pieces of the corpus: every run of non-separators, and each separator on its own."""
    pieces: set[bytes] = set()
    for entry in load_corpus(protocol):
        for half in (entry.client, entry.server):
            pieces.update(p for p in re.split(rb"(\r\n|\n|\r| |\t|\x00)", half) if p)
    return sorted(p for p in pieces if len(p) <= 64)


def token_soup(protocol: str, max_tokens: int = 60) -> st.SearchStrategy[bytes]:
    """Corpus tokens (and a few random bytes) in any order."""
    token = st.one_of(st.sampled_from(_tokens(protocol)), st.binary(max_size=4))
    return st.lists(token, max_size=max_tokens).map(b"".join)


def mutated(protocol: str, half: str) -> st.SearchStrategy[tuple[bytes, Entry]]:
    """``(bytes, entry)``: the ``half`` ("client" or "server") of a corpus entry, possibly
    joined with the same half of other entries, then mutated (or left as it is)."""
    entries = load_corpus(protocol)
    donors = [getattr(e, half) for e in entries if getattr(e, half)]

    @st.composite
    def build(draw: st.DrawFn) -> tuple[bytes, Entry]:
        entry = draw(st.sampled_from(entries))
        base = getattr(entry, half)
        if draw(st.booleans()):  # a longer conversation: this entry and those after it
            start = entries.index(entry)
            more = entries[start : start + draw(st.integers(2, 6))]
            base = b"".join(getattr(e, half) for e in more)
            entry = Entry(protocol, entry.name + "+", b"".join(e.client for e in more),
                          b"".join(e.server for e in more))
        if draw(st.integers(0, 9)) == 0:
            return base, entry
        return mutate(base, draw(st.randoms(use_true_random=False)), donors), entry

    return build()


def oversized(prefixes: Sequence[bytes], filler: bytes, size: int) -> st.SearchStrategy[bytes]:
    """A prefix (a command or reply start) and then ``size`` or more bytes with no terminator:
    a block of bytes drawn from ``filler`` repeated."""
    block = st.lists(st.sampled_from(filler), min_size=1, max_size=32).map(bytes)
    return st.tuples(st.sampled_from(list(prefixes)), block, st.integers(size, size * 2)).map(
        lambda t: (t[0] + t[1] * (t[2] // len(t[1]) + 1))[: len(t[0]) + t[2]]
    )


def chunkings(data: bytes, max_cuts: int = 12) -> st.SearchStrategy[list[bytes]]:
    """``data`` cut anywhere into chunks (at least one cut when it has two bytes or more)."""
    if len(data) < 2:
        return st.just(split(data, ()))
    return st.lists(st.integers(1, len(data) - 1), min_size=1, max_size=max_cuts).map(
        lambda cuts: split(data, cuts)
    )


def requests(
    commands: Sequence[Any], encode: Callable[[Any], bytes] = lambda c: c.encode()
) -> st.SearchStrategy[bytes]:
    """The bytes of 1-12 of ``commands``, as a client role's context: the commands it sends
    before it reads."""
    return st.lists(st.sampled_from(list(commands)), min_size=1, max_size=12).map(
        lambda cs: b"".join(encode(c) for c in cs)
    )
