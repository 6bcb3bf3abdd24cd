"""The server side of the Workq protocol as a Sans-IO state machine.

Bytes in, commands out; replies in, bytes out. It frames input as the Workq 0.2.0 server does
(``tests/transcripts/workq-0.2.0.jsonl``, ``docs/workq.md``), with one deliberate difference:

* a line ends at LF; if the byte before it is not CR (a bare LF) the connection is closed without
  a reply, as Workq does;
* tokens are separated by single spaces (empty tokens are skipped); a token that starts with
  ``-`` and holds ``=`` is a ``-key=value`` flag wherever it stands; an empty key or value, or a
  repeated key, is ``Invalid command flags``; unknown flag names are ignored;
* commands are lower case; anything else is ``Unknown command``; a wrong argument count is
  ``Invalid command args``;
* **the difference:** Workq answers a payload command whose size it cannot use (wrong argument
  count, size over 1 MiB) without reading the payload, so the payload is then read as a command
  and gets a second error. This server never desyncs: a size over 1 MiB is discarded (size + 2
  bytes) and, with a wrong argument count, the last plain token (or, with too many, the one where
  the size belongs) is taken as the size when it is a number in range. Only an unreadable size
  leaves the payload to be read as a command;
* after the payload, the next two bytes must be CRLF (``Invalid payload size`` /
  ``Invalid result size`` otherwise; those two bytes are consumed, as Workq does);
* a payload command whose encoded total (line, CRLF, payload, CRLF) is one of
  :data:`~workq_client._commands.REFUSED_TOTALS` (4097 or 8193 bytes) is refused as Workq 0.2.0
  refuses it even with nothing else in flight: its payload and CR are read, the error sent
  (``Invalid payload size``; ``Invalid result size`` for ``fail``), and the LF left over ends
  the connection as a bare LF does (docs/workq.md);
* argument values are checked with the command classes' own validators, so the error texts
  (``Invalid ID``, ``Invalid Priority``...) and ranges agree with the client by construction.

``next_event()`` never raises on client input: garbage becomes a :class:`BadRequest` to answer.
"""

from __future__ import annotations

from collections.abc import Callable

from jobwire._buffer import LineTooLong, ReceiveBuffer
from jobwire._record import record
from jobwire.errors import LocalProtocolError

from ._commands import (
    MAX_PAYLOAD,
    REFUSED_TOTALS,
    Add,
    Command,
    Complete,
    Delete,
    Fail,
    InspectJob,
    InspectJobs,
    InspectQueue,
    InspectQueues,
    InspectScheduledJobs,
    InspectServer,
    InvalidArgument,
    Lease,
    Result,
    Run,
    Schedule,
    parse_time,
    validate_id,
    validate_name,
)
from ._events import NEED_DATA, ConnectionClosed, ErrorKind, ErrorReply, Event, NeedData, Reply

__all__ = ["MAX_COMMAND_LINE", "BadRequest", "ServerConnection"]

#: Longest command line (without the data block): Workq reads at most ~10 kB of command.
MAX_COMMAND_LINE = 65536


@record
class BadRequest(Event):
    """Input the server must answer with ``-CLIENT-ERROR <text>`` instead of running it."""

    text: str

    @property
    def reply(self) -> ErrorReply:
        """The error reply to send."""
        return ErrorReply(ErrorKind.CLIENT_ERROR, self.text)


class _Bad(Exception):
    def __init__(self, text: str) -> None:
        self.text = text


def _int(raw: bytes, text: str, *, signed: bool = False) -> int:
    digits = raw[1:] if signed and raw[:1] in (b"-", b"+") else raw
    if not digits.isdigit() or len(digits) > 20:
        raise _Bad(text)
    return int(raw)


def _str(raw: bytes, text: str) -> str:
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        raise _Bad(text) from None


def _size(raw: bytes) -> int | None:
    """A payload size as Go's ``strconv.Atoi`` reads it; None when it cannot be read."""
    digits = raw[1:] if raw[:1] in (b"-", b"+") else raw
    if not digits.isdigit() or len(digits) > 19:
        return None
    return int(raw)


# Positional argument counts after the command word (Workq's argC minus one).
_PAYLOAD_ARITY = {b"add": 5, b"schedule": 6, b"run": 5, b"complete": 2, b"fail": 2}
_MAX_FLAGS = {b"add": 3, b"schedule": 3, b"run": 1}


class ServerConnection:
    """The server role of one Workq connection. No I/O of its own."""

    __slots__ = ("_buffer", "_closed", "_discard", "_eof", "_payload_cmd")

    def __init__(self) -> None:
        self._buffer = ReceiveBuffer()
        self._eof = False
        self._closed = False
        self._discard = 0  # bytes of a rejected payload still to drop
        # A payload command whose data block is awaited: (word, args, flags, size, and whether
        # its encoded total is one Workq refuses).
        self._payload_cmd: tuple[bytes, list[bytes], dict[bytes, bytes], int, bool] | None = None

    def receive_data(self, data: bytes) -> None:
        """Feed bytes read from the client; ``b""`` means the client closed (or half-closed).

        Raises:
            LocalProtocolError: bytes fed after ``b""`` (the rule of every core: the caller is
                out of step); nothing is fed.
        """
        if data:
            if self._eof:
                raise LocalProtocolError("receive_data after EOF")
            if not self._closed:
                self._buffer.feed(data)
        else:
            self._eof = True

    @property
    def eof(self) -> bool:
        """True once the client has closed its sending side."""
        return self._eof

    @property
    def partial(self) -> bool:
        """True while part of a command is held: a line without its end, a payload not yet
        complete, or a rejected payload being dropped (the server's line timeout runs
        meanwhile)."""
        return bool(self._buffer or self._payload_cmd is not None or self._discard)

    def send(self, reply: Reply) -> bytes:
        """The bytes of ``reply``."""
        return reply.encode()

    def next_event(self) -> Command | BadRequest | ConnectionClosed | NeedData:
        """Return the next command, a ``BadRequest`` to answer, ``ConnectionClosed`` (the client
        closed, or must be disconnected: see ``reason``) or :data:`NEED_DATA`."""
        if self._closed:
            return ConnectionClosed(reason="closed")
        buffer = self._buffer
        if self._discard:
            self._discard -= buffer.discard(self._discard)
            if self._discard:
                return self._need()
        if self._payload_cmd is not None:
            return self._read_payload()
        try:
            line = buffer.extract_line(MAX_COMMAND_LINE)
        except LineTooLong:
            # A bare LF within the line's bytes is what ended it, however the bytes arrived.
            head = buffer.peek(min(len(buffer), MAX_COMMAND_LINE + 2)) or b""
            if b"\n" in head:
                return self._close("bare LF line ending")
            return self._close("command line too long")
        if line is None:
            pending = buffer.peek(len(buffer)) or b""
            if b"\n" in pending:
                return self._close("bare LF line ending")
            return self._need()
        if b"\n" in line:
            return self._close("bare LF line ending")
        try:
            return self._parse(line)
        except _Bad as bad:
            return BadRequest(bad.text)

    def _close(self, reason: str) -> ConnectionClosed:
        self._closed = True
        return ConnectionClosed(partial=True, reason=reason)

    def _need(self) -> ConnectionClosed | NeedData:
        return ConnectionClosed(partial=bool(self._buffer)) if self._eof else NEED_DATA

    def _parse(self, line: bytes) -> Command | BadRequest | ConnectionClosed | NeedData:
        tokens = line.split(b" ")
        word = tokens[0]
        args: list[bytes] = []
        flags: dict[bytes, bytes] = {}
        bad_flags = False
        for token in tokens[1:]:
            if not token:
                continue
            if token[:1] != b"-" or b"=" not in token:
                args.append(token)
                continue
            key, _, value = token.partition(b"=")
            if len(key) <= 1 or not value or key[1:] in flags:
                bad_flags = True
            flags[key[1:]] = value
        arity = _PAYLOAD_ARITY.get(word)
        if arity is not None:
            return self._start_payload(word, args, flags, arity, bad_flags, len(line) + 2)
        if bad_flags:
            raise _Bad("Invalid command flags")
        parse = _SIMPLE.get(word)
        if parse is None:
            raise _Bad("Unknown command")
        return parse(args, flags)

    def _start_payload(
        self, word: bytes, args: list[bytes], flags: dict[bytes, bytes], arity: int,
        bad_flags: bool, line_size: int,
    ) -> Command | BadRequest | ConnectionClosed | NeedData:
        if len(args) != arity:
            # Never desync: drop the data block when its size can be guessed.
            candidates = args[-1:] + (args[arity - 1 : arity] if len(args) > arity else [])
            for candidate in candidates:
                size = _size(candidate)
                if size is not None and 0 <= size <= MAX_PAYLOAD:
                    self._discard = size + 2
                    break
            raise _Bad("Invalid command args")
        size = _size(args[-1])
        size_text = "Invalid result size" if word == b"fail" else "Invalid payload size"
        if size is None or size < 0:
            raise _Bad(size_text)
        if size > MAX_PAYLOAD:
            self._discard = size + 2
            raise _Bad(size_text)
        if bad_flags or len(flags) > _MAX_FLAGS.get(word, 3):
            self._discard = size + 2
            raise _Bad("Invalid command flags")
        self._payload_cmd = (word, args, flags, size, line_size + size + 2 in REFUSED_TOTALS)
        return self._read_payload()

    def _read_payload(self) -> Command | BadRequest | ConnectionClosed | NeedData:
        assert self._payload_cmd is not None
        word, args, flags, size, refused = self._payload_cmd
        if refused:  # Workq reads the payload and the CR only; the LF then closes (above)
            if len(self._buffer) < size + 2:
                return self._need()
            self._buffer.extract_exactly(size + 1)
            self._payload_cmd = None
            return BadRequest("Invalid result size" if word == b"fail" else "Invalid payload size")
        chunk = self._buffer.extract_exactly(size + 2)
        if chunk is None:
            return self._need()
        self._payload_cmd = None
        if not chunk.endswith(b"\r\n"):
            return BadRequest("Invalid result size" if word == b"fail" else "Invalid payload size")
        try:
            return _build_payload(word, args, flags, chunk[:-2])
        except _Bad as bad:
            return BadRequest(bad.text)


def _flag(flags: dict[bytes, bytes], name: bytes, text: str, *, signed: bool = False) -> int:
    raw = flags.get(name)
    return 0 if raw is None else _int(raw, text, signed=signed)


def _build_payload(
    word: bytes, args: list[bytes], flags: dict[bytes, bytes], payload: bytes
) -> Command:
    try:
        if word in (b"complete", b"fail"):
            cls = Complete if word == b"complete" else Fail
            return cls(_str(args[0], "Invalid ID"), payload)
        job_id = _str(args[0], "Invalid ID")
        # Check in the order the fields are given, so the first bad one is reported.
        validate_id(job_id)
        name = validate_name(_str(args[1], "Invalid name"))
        ttr = _int(args[2], "Invalid TTR")
        priority = _flag(flags, b"priority", "Invalid Priority", signed=True)
        if word == b"run":
            wait = _int(args[3], "Invalid wait timeout")
            return Run(name, payload, ttr, wait, priority, job_id=job_id)
        ttl = _int(args[3], "Invalid TTL")
        attempts = _flag(flags, b"max-attempts", "Invalid max attempts")
        fails = _flag(flags, b"max-fails", "Invalid max fails")
        if word == b"add":
            return Add(name, payload, ttr, ttl, priority, attempts, fails, job_id=job_id)
        try:
            when = parse_time(_str(args[4], "Invalid time"))
        except ValueError:
            raise _Bad("Invalid time") from None
        return Schedule(name, payload, ttr, ttl, when, priority, attempts, fails, job_id=job_id)
    except InvalidArgument as exc:
        raise _Bad(exc.server_text) from None


def _parse_lease(args: list[bytes], flags: dict[bytes, bytes]) -> Command:
    if len(args) < 2:
        raise _Bad("Invalid command args")
    names = tuple(_str(a, "Invalid name") for a in args[:-1])
    return Lease(names, _int(args[-1], "Invalid wait timeout"))


def _parse_result(args: list[bytes], flags: dict[bytes, bytes]) -> Command:
    if len(args) != 2:
        raise _Bad("Invalid command args")
    return Result(_str(args[0], "Invalid ID"), _int(args[1], "Invalid wait timeout"))


def _parse_delete(args: list[bytes], flags: dict[bytes, bytes]) -> Command:
    if len(args) != 1:
        raise _Bad("Invalid command args")
    return Delete(_str(args[0], "Invalid ID"))


def _parse_inspect(args: list[bytes], flags: dict[bytes, bytes]) -> Command:
    if not args:
        raise _Bad("Invalid command args")
    obj, rest = args[0], args[1:]
    arity = {b"server": 0, b"queues": 2, b"queue": 1, b"jobs": 3, b"scheduled-jobs": 3,
             b"job": 1}.get(obj)
    if arity is None:
        raise _Bad("Unknown command")
    if len(rest) != arity or flags:
        raise _Bad("Invalid command args")
    if obj == b"server":
        return InspectServer()
    if obj == b"job":
        return InspectJob(_str(rest[0], "Invalid ID"))
    if obj == b"queue":
        return InspectQueue(_str(rest[0], "Invalid name"))
    if obj == b"queues":
        return InspectQueues(_int(rest[0], "Invalid cursor offset"),
                             _int(rest[1], "Invalid limit"))
    name = _str(rest[0], "Invalid name")
    offset = _int(rest[1], "Invalid cursor offset")
    limit = _int(rest[2], "Invalid limit")
    cls = InspectJobs if obj == b"jobs" else InspectScheduledJobs
    return cls(name, offset, limit)


def _guard(parse: Callable[[list[bytes], dict[bytes, bytes]], Command]) -> Callable[
    [list[bytes], dict[bytes, bytes]], Command
]:
    def wrapped(args: list[bytes], flags: dict[bytes, bytes]) -> Command:
        try:
            return parse(args, flags)
        except InvalidArgument as exc:
            raise _Bad(exc.server_text) from None

    return wrapped


_SIMPLE: dict[bytes, Callable[[list[bytes], dict[bytes, bytes]], Command]] = {
    b"lease": _guard(_parse_lease),
    b"result": _guard(_parse_result),
    b"delete": _guard(_parse_delete),
    b"inspect": _guard(_parse_inspect),
}
