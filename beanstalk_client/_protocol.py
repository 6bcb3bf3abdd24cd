"""The client side of the beanstalk protocol as a Sans-IO state machine.

    conn = Connection()
    sock.sendall(conn.send(Put(b"hello")))      # commands in, bytes out
    conn.receive_data(sock.recv(65536))         # bytes in ...
    event = conn.next_event()                   # ... events out: Inserted(job_id=1)

Why it is shaped like this:

* beanstalkd answers the commands of one connection strictly in order, so the connection keeps a
  FIFO of commands awaiting replies. Any number may be pipelined; each reply is checked against
  the command at the head of the FIFO (``Command.accepts``), so a reply that cannot answer it is
  caught as a desync instead of being handed to the wrong caller.
* ``next_event()`` drains what is already buffered without another read: one ``recv`` may carry
  hundreds of pipelined replies.
* Framing is strict: lines end in CRLF only and are at most 224 bytes; bodies are read by length
  and must be followed by CRLF; a body longer than ``max_body_size`` (64 MiB by default) is
  refused before it is buffered, so a hostile server cannot exhaust memory. Any violation raises
  ``RemoteProtocolError`` and poisons the connection: every later call raises again.
* After ``BAD_FORMAT``, ``UNKNOWN_COMMAND`` or ``EXPECTED_CRLF`` the server may read leftover
  bytes as a new command (docs/beanstalkd.md), so nothing after them can be trusted: the reply
  is returned, then the connection reports ``ConnectionClosed`` and refuses new commands.
* EOF is ``receive_data(b"")``; ``next_event()`` then returns ``ConnectionClosed`` saying how many
  commands were left unanswered and whether a reply was cut short.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Callable

from jobwire._buffer import LineTooLong, MissingTerminator
from jobwire._core import ConnectionState, InOrderClientCore
from jobwire._numbers import MAX_DIGITS, parse_uint
from jobwire._typing import mypyc_attr
from jobwire.errors import LocalProtocolError, RemoteProtocolError

from ._commands import MAX_LINE, Command, Put, Quit, validate_tube
from ._events import (
    DELETED,
    NEED_DATA,
    PAUSED,
    RELEASED,
    TOUCHED,
    BuriedReply,
    ConnectionClosed,
    ErrorCode,
    ErrorReply,
    Found,
    Inserted,
    Kicked,
    NeedData,
    Ok,
    Reply,
    Reserved,
    Using,
    Watching,
)

__all__ = ["DEFAULT_MAX_BODY_SIZE", "Connection", "ConnectionState"]

#: Largest job body or stats document accepted from a server by default.
DEFAULT_MAX_BODY_SIZE = 64 * 1024 * 1024


def _int(raw: bytes) -> int:
    return parse_uint(raw, "a number in the reply")


def _no_args(reply: Reply) -> Callable[[Command[Reply], bytes], Reply]:
    def parse(command: Command[Reply], rest: bytes) -> Reply:
        if rest:
            raise RemoteProtocolError(f"{reply.word} takes no arguments, got {rest[:40]!r}")
        return reply

    return parse


def _parse_inserted(command: Command[Reply], rest: bytes) -> Reply:
    return Inserted(_int(rest))


def _parse_buried(command: Command[Reply], rest: bytes) -> Reply:
    # put answers "BURIED <id>"; bury and release answer a bare "BURIED".
    if command.name == "put":
        return BuriedReply(_int(rest))
    if rest:
        raise RemoteProtocolError(f"BURIED to {command.name} takes no id, got {rest[:40]!r}")
    return BuriedReply(None)


def _parse_using(command: Command[Reply], rest: bytes) -> Reply:
    try:
        return Using(validate_tube(rest.decode("ascii")))
    except (UnicodeDecodeError, LocalProtocolError) as exc:
        raise RemoteProtocolError(f"USING with an invalid tube name {rest[:40]!r}") from exc


def _parse_watching(command: Command[Reply], rest: bytes) -> Reply:
    return Watching(_int(rest))


def _parse_kicked(command: Command[Reply], rest: bytes) -> Reply:
    if command.name == "kick":
        return Kicked(_int(rest))
    if rest:
        raise RemoteProtocolError(f"KICKED to kick-job takes no count, got {rest[:40]!r}")
    return Kicked(None)


_LINE_PARSERS: dict[bytes, Callable[[Command[Reply], bytes], Reply]] = {
    b"INSERTED": _parse_inserted,
    b"BURIED": _parse_buried,
    b"USING": _parse_using,
    b"WATCHING": _parse_watching,
    b"KICKED": _parse_kicked,
    b"DELETED": _no_args(DELETED),
    b"RELEASED": _no_args(RELEASED),
    b"TOUCHED": _no_args(TOUCHED),
    b"PAUSED": _no_args(PAUSED),
}
for _code in ErrorCode:
    _LINE_PARSERS[_code.value.encode()] = _no_args(ErrorReply(_code))

_BODY_REPLIES = (b"RESERVED", b"FOUND", b"OK")


class _Step(enum.Enum):
    """What the parser reads next."""

    LINE = 0  # a reply's line
    BODY = 1  # the body a RESERVED, FOUND or OK line announced, and its CRLF


# For the hot paths: an enum member looked up on its class costs as much as a call.
_LINE, _BODY = _Step.LINE, _Step.BODY
#: A read of nothing but whole INSERTED lines (each id as the one-line parser accepts it).
_INSERTED_RUN = re.compile(rb"(?:INSERTED [0-9]{1,%d}\r\n)+" % MAX_DIGITS)
_INSERTED_ID = re.compile(rb"INSERTED ([0-9]+)\r\n")
_OPEN = ConnectionState.OPEN  # an enum member looked up on its class costs as much as a call
#: The replies that are one word and nothing else, as their (shared, immutable) events.
_BARE_REPLIES: dict[bytes, Reply] = {
    b"DELETED": DELETED, b"RELEASED": RELEASED, b"TOUCHED": TOUCHED, b"PAUSED": PAUSED,
    **{code.value.encode(): ErrorReply(code) for code in ErrorCode},
}
#: A read that is one such line and nothing else, for those that leave the connection usable
#: (the one-reply read returns no other): (the word, the event).
_ONE_BARE_LINE: dict[bytes, tuple[bytes, Reply]] = {
    word + b"\r\n": (word, reply) for word, reply in _BARE_REPLIES.items()
    if not (type(reply) is ErrorReply and reply.fatal)
}
_LONGEST_BARE_LINE = max(map(len, _ONE_BARE_LINE))
#: The same replies by their word alone (a line of a run: ``_reply_run``).
_RUN_BARE: dict[bytes, tuple[bytes, Reply]] = {
    word: (word, reply) for word, reply in _BARE_REPLIES.items()
    if not (type(reply) is ErrorReply and reply.fatal)
}
#: One INSERTED line, and the line of a RESERVED reply (ids and sizes as the parser accepts).
_ONE_INSERTED = re.compile(rb"INSERTED ([0-9]{1,%d})\r\n" % MAX_DIGITS)
_RESERVED_LINE = re.compile(rb"RESERVED ([0-9]{1,%d}) ([0-9]{1,%d})\r\n" % (MAX_DIGITS, MAX_DIGITS))


@mypyc_attr(allow_interpreted_subclasses=True)
class Connection(InOrderClientCore):
    """The client role of one beanstalk connection. Not thread-safe; no I/O of its own.

    Args:
        max_body_size: the largest job body or stats document accepted from the server; a
            larger announced size is a ``RemoteProtocolError`` before any of it is buffered.
    """

    __slots__ = ("_body_id", "_body_size", "_body_word", "_step", "max_body_size")

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> None:
        super().__init__()
        self._step = _LINE
        # In step BODY: the line that announced the body (reply word, job id or -1, size).
        self._body_word = b""
        self._body_id = -1
        self._body_size = 0
        self.max_body_size = max_body_size

    def send(self, command: Command[Reply]) -> bytes:
        """Record ``command`` as awaiting a reply and return its bytes.

        Raises:
            LocalProtocolError: the connection is closing, closed or poisoned.
        """
        if self._state is not _OPEN:
            self._check_open(command.name)
        data = command.encode()
        if type(command) is Quit:
            self._state = ConnectionState.CLOSING
        else:
            self._pending.append(command)
        return data

    def receive_batch(self, data: bytes) -> list[Reply] | None:
        """:meth:`receive_data` and the :meth:`next_event` calls after it in one step (the
        session's batch hook, ``jobwire._core.InOrderClientCore.receive_batch``) for the two
        commonest reads, when nothing else is buffered:

        * one whole reply and nothing else (a call made one at a time): ``INSERTED <id>``, a
          one-word reply that leaves the connection usable (``DELETED``, ``NOT_FOUND``...) or
          ``RESERVED <id> <bytes>`` with its body, answering the oldest command;
        * two or more whole ``INSERTED <id>`` lines and nothing else, every command they
          answer a put (pipelined puts);
        * two or more whole ``RESERVED`` replies and usable one-word replies, in any order
          (a worker's pipelined reserves and deletes: :meth:`_reply_run`).

        Those commands are answered and their events returned in order. Otherwise nothing
        happens and it returns None: the line parser reads ``data`` (and raises what it
        raises). A property test holds this path to the line parser.
        """
        pending = self._pending
        if (
            not pending
            or self._step is not _LINE
            or self._buffer._data
            or self._eof
            or self._state is not _OPEN
        ):
            return None
        if len(data) <= _LONGEST_BARE_LINE and (bare := _ONE_BARE_LINE.get(data)) is not None:
            if bare[0] not in pending[0].accepts:
                return None
            pending.popleft()
            return [bare[1]]
        if data[:9] == b"RESERVED ":
            line = _RESERVED_LINE.match(data)
            if line is None or b"RESERVED" not in pending[0].accepts:
                return None
            size = int(line[2])
            start = line.end()
            if start + size + 2 != len(data):
                return self._reply_run(data)  # more than one reply, or a part of one
            if size > self.max_body_size or not data.endswith(b"\r\n"):
                return None
            pending.popleft()
            return [Reserved(int(line[1]), data[start:start + size])]
        if data[:9] != b"INSERTED ":
            return self._reply_run(data)
        if (one := _ONE_INSERTED.fullmatch(data)) is not None:
            if b"INSERTED" not in pending[0].accepts:
                return None
            pending.popleft()
            return [Inserted(int(one[1]))]
        if _INSERTED_RUN.fullmatch(data) is None:
            return None
        ids = _INSERTED_ID.findall(data)
        count = len(ids)
        if len(pending) < count:
            return None
        for command in itertools.islice(pending, count):
            if type(command) is not Put:
                return None
        for _ in range(count):
            pending.popleft()
        return [Inserted(int(job_id)) for job_id in ids]

    def _reply_run(self, data: bytes) -> list[Reply] | None:
        """A read of nothing but whole ``RESERVED <id> <bytes>`` replies (body and CRLF
        included) and one-word replies that leave the connection usable (``DELETED``,
        ``TIMED_OUT``, ``DEADLINE_SOON``, ``NOT_FOUND``...), each one a reply the command it
        answers accepts (a worker's reserves and deletes, pipelined): their events, those
        commands answered; else None, nothing done (:meth:`receive_batch`)."""
        pending = self._pending
        events: list[Reply] = []
        add = events.append
        pos, end, most = 0, len(data), self.max_body_size
        for command in pending:
            if data.startswith(b"RESERVED ", pos):
                line = _RESERVED_LINE.match(data, pos)
                if line is None or b"RESERVED" not in command.accepts:
                    return None
                start = line.end()
                size = int(line[2])
                stop = start + size
                if size > most or data[stop:stop + 2] != b"\r\n":
                    return None
                add(Reserved(int(line[1]), data[start:stop]))
                pos = stop + 2
            else:
                eol = data.find(b"\r\n", pos, pos + _LONGEST_BARE_LINE)
                bare = _RUN_BARE.get(data[pos:eol]) if eol >= 0 else None
                if bare is None or bare[0] not in command.accepts:
                    return None
                add(bare[1])
                pos = eol + 2
            if pos == end:
                for _ in events:
                    pending.popleft()
                return events
        return None

    def _closed(self) -> ConnectionClosed:
        self._state = ConnectionState.CLOSED
        return ConnectionClosed(
            pending=len(self._pending),
            partial=bool(self._buffer) or self._step is not _LINE,
            reason=self._closed_reason,
        )

    def _next_event(self) -> Reply | ConnectionClosed | NeedData:
        if self._step is _BODY:
            return self._read_body(self._body_word, self._body_id, self._body_size)
        try:
            line = self._buffer.extract_line(MAX_LINE)
        except LineTooLong as exc:
            raise RemoteProtocolError(
                f"reply line longer than {MAX_LINE} bytes ({exc.length}+)"
            ) from None
        if line is None:
            return self._closed() if self._eof else NEED_DATA
        pending = self._pending
        if not pending:
            raise RemoteProtocolError(f"reply with no command awaiting one: {line[:60]!r}")
        command = pending[0]
        word, sep, rest = line.partition(b" ")
        if sep and not rest:
            raise RemoteProtocolError(f"reply with a trailing space: {line[:60]!r}")
        if word not in command.accepts:
            raise RemoteProtocolError(
                f"{line[:60]!r} cannot answer {command.name!r} (out of step?)"
            )
        # The hot replies first, inline: INSERTED <id>, then the bare words (DELETED, ...),
        # then the replies with a body (RESERVED <id> <bytes>, FOUND, OK <bytes>).
        if word == b"INSERTED" and 0 < len(rest) <= MAX_DIGITS and rest.isdigit():
            pending.popleft()
            return Inserted(int(rest))
        reply = _BARE_REPLIES.get(word) if not rest else None
        if reply is None:
            if word in _BODY_REPLIES:
                if word == b"OK":
                    job_id, raw_size = -1, rest
                else:
                    raw_id, _, raw_size = rest.partition(b" ")
                    job_id = (
                        int(raw_id) if 0 < len(raw_id) <= MAX_DIGITS and raw_id.isdigit()
                        else _int(raw_id)  # raises
                    )
                size = (
                    int(raw_size) if 0 < len(raw_size) <= MAX_DIGITS and raw_size.isdigit()
                    else _int(raw_size)  # raises
                )
                if size > self.max_body_size:
                    raise RemoteProtocolError(
                        f"{word.decode()} announces {size} bytes, over "
                        f"max_body_size={self.max_body_size}"
                    )
                return self._read_body(word, job_id, size)
            reply = _LINE_PARSERS[word](command, rest)
        pending.popleft()
        if type(reply) is ErrorReply and reply.fatal:
            self._state = ConnectionState.CLOSED
            self._closed_reason = f"out of step after {reply.code.value}"
        return reply

    def _read_body(
        self, word: bytes, job_id: int, size: int
    ) -> Reply | ConnectionClosed | NeedData:
        """The reply with the body ``word`` announced, once the body and its CRLF are
        buffered; until then the parser stays in step BODY."""
        try:
            body = self._buffer.extract_terminated(size)
        except MissingTerminator:
            raise RemoteProtocolError(
                f"{word.decode()} body of {size} bytes not followed by CRLF"
            ) from None
        if body is None:
            self._step = _BODY
            self._body_word, self._body_id, self._body_size = word, job_id, size
            return self._closed() if self._eof else NEED_DATA
        self._step = _LINE
        self._pending.popleft()
        if word == b"RESERVED":
            return Reserved(job_id, body)
        if word == b"FOUND":
            return Found(job_id, body)
        return Ok(body)
