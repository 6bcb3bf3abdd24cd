"""The server side of the beanstalk protocol as a Sans-IO state machine.

Bytes in, commands out; replies in, bytes out. It reproduces how beanstalkd 1.12 frames and
parses input, byte for byte (measured against the real server, and read from its ``prot.c``):

* **A 224-byte command buffer.** beanstalkd looks for the end of a line in the first 223 bytes
  of its buffer, and only at the *first* CR: a CR not followed by LF is not a line end, and
  neither is a later CRLF (``use a\rb\r\n`` is answered nothing until 224 bytes have come).
  When 224 bytes hold no line end, it throws them away and goes on throwing away 224-byte
  buffers until one holds a line end, then answers one ``BAD_FORMAT`` and reads on after it.
  A CRLF whose CR is the 224th byte of a buffer is lost with it, so the *next* line end ends
  the over-long line and the command after it is swallowed: ``"use " + "b" * 219 +
  "\r\nuse ok\r\n"`` is one BAD_FORMAT.
* **Command words by prefix**, in beanstalkd's order (``which_cmd``): ``reservex`` is a
  ``reserve`` with trailing garbage (``BAD_FORMAT``), ``quitx`` quits, ``use`` without its space
  is ``UNKNOWN_COMMAND``. A NUL anywhere in the line is ``BAD_FORMAT``.
* **Numbers as its C readers take them.** Job ids, priorities, delays, TTRs and sizes skip
  leading spaces, must start with a digit and may have nothing after the last field
  (``delete  1`` is fine, ``delete +1`` is not). ``reserve-with-timeout`` uses ``strtol``: it
  skips any white space, takes a sign, stops at the first non-digit and reads no digits as 0
  (``abc``, ``0x10``, ``+0`` wait 0 s; ``1abc`` waits 1 s); only a number outside 64 bits is
  ``BAD_FORMAT``; the result is then cut to a C ``int``, so a negative one blocks like
  ``reserve`` and 4294967297 waits 1 s. ``kick`` uses ``strtoul`` (a count with no digits is
  ``BAD_FORMAT``) and keeps the low 32 bits (``kick -1`` kicks up to 2**32-1 jobs).
* ``put`` with a size over ``max_job_size`` is ``JOB_TOO_BIG`` and the body (plus CRLF) is
  discarded, keeping the connection usable; a body not followed by CRLF is ``EXPECTED_CRLF``
  after ``<bytes>+2`` bytes; what follows is read as a new command, as beanstalkd does.
* After ``BAD_FORMAT`` or ``UNKNOWN_COMMAND`` nothing more is read for that line, so a body that
  followed is read as the next command.

Validation of names reuses the command classes' own checks, so the client and the server agree
by construction.

The common ``put`` (four plain numbers one space apart, its body already buffered) is read in
one step, which is most of what a pipelined put costs the bundled server; every other form
takes the general path above, and tests check that both read every form alike, at every split.
A body that takes many reads is held as the chunks came and joined once, when it is whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import MemberDescriptorType

from jobwire._record import record
from jobwire.errors import LocalProtocolError

from ._commands import (
    MAX_LINE,
    U32_MAX,
    U64_MAX,
    Bury,
    Command,
    Delete,
    Ignore,
    Kick,
    KickJob,
    ListTubes,
    ListTubesWatched,
    ListTubeUsed,
    PauseTube,
    Peek,
    PeekBuried,
    PeekDelayed,
    PeekReady,
    Put,
    Quit,
    Release,
    Reserve,
    ReserveJob,
    ReserveWithTimeout,
    Stats,
    StatsJob,
    StatsTube,
    Touch,
    Use,
    Watch,
    validate_tube,
)
from ._events import NEED_DATA, ConnectionClosed, ErrorCode, Event, NeedData, Reply

__all__ = ["BadRequest", "ServerConnection"]

DEFAULT_MAX_JOB_SIZE = 65535


@record
class BadRequest(Event):
    """Input the server must answer with an error reply (``code``) instead of running it.

    ``counted`` names the stats counter beanstalkd increments before it rejects the command
    (``cmd-put`` for a put with garbage after its size), or is empty.
    """

    code: ErrorCode
    detail: str = ""
    counted: str = ""


_Parsed = Command[Reply] | BadRequest | ConnectionClosed | NeedData
#: Parses the rest of a line once its command word matched (the line, where the rest starts).
_Parser = Callable[["ServerConnection", bytes, int], _Parsed]
_SPACE = 0x20
_CR, _LF = 0x0D, 0x0A
#: What C's isspace() skips before a number (strtol, strtoul).
_C_SPACE = b" \t\n\v\f\r"


class _Malformed(Exception):
    """A field beanstalkd would not read: the line is answered BAD_FORMAT."""


def _read_uint(line: bytes, pos: int, high: int, *, last: bool) -> tuple[int, int]:
    """beanstalkd's ``read_u64``/``read_u32``: skip spaces, a digit must follow, at most
    ``high``; with ``last``, nothing may follow. Returns (value, position after it)."""
    size = len(line)
    while pos < size and line[pos] == _SPACE:
        pos += 1
    end = pos
    while end < size and 0x30 <= line[end] <= 0x39:
        end += 1
    if end == pos or (last and end != size):
        raise _Malformed
    value = int(line[pos:end])
    if value > high:
        raise _Malformed
    return value, end


def _strtol(raw: bytes, *, signed: bool) -> int | None:
    """C's ``strtol`` (``signed``) or ``strtoul`` in base 10: white space, a sign, digits, and
    whatever follows ignored. ``None`` when there are no digits.

    Raises:
        _Malformed: out of range (``ERANGE``).
    """
    size = len(raw)
    pos = 0
    while pos < size and raw[pos] in _C_SPACE:
        pos += 1
    negative = pos < size and raw[pos] == 0x2D
    if pos < size and raw[pos] in b"+-":
        pos += 1
    end = pos
    while end < size and 0x30 <= raw[end] <= 0x39:
        end += 1
    if end == pos:
        return None
    value = int(raw[pos:end])
    if signed:
        value = -value if negative else value
        if not -(2**63) <= value < 2**63:
            raise _Malformed
        return value
    if value > U64_MAX:
        raise _Malformed
    return (-value) % 2**64 if negative else value


def _tube(line: bytes, start: int) -> str:
    try:
        return validate_tube(line[start:].decode("ascii"))
    except (UnicodeDecodeError, LocalProtocolError):
        raise _Malformed from None


def _exact(command: Command[Reply]) -> _Parser:
    def parse(conn: ServerConnection, line: bytes, start: int) -> _Parsed:
        if len(line) != start:
            raise _Malformed  # "don't allow trailing garbage"
        return command

    return parse


def _by_id(cls: Callable[[int], Command[Reply]]) -> _Parser:
    def parse(conn: ServerConnection, line: bytes, start: int) -> _Parsed:
        return cls(_read_uint(line, start, U64_MAX, last=True)[0])

    return parse


def _by_tube(cls: Callable[[str], Command[Reply]]) -> _Parser:
    def parse(conn: ServerConnection, line: bytes, start: int) -> _Parsed:
        return cls(_tube(line, start))

    return parse


def _put(conn: ServerConnection, line: bytes, start: int) -> _Parsed:
    pri, pos = _read_uint(line, start, U32_MAX, last=False)
    delay, pos = _read_uint(line, pos, U32_MAX, last=False)
    ttr, pos = _read_uint(line, pos, U32_MAX, last=False)
    size, pos = _read_uint(line, pos, U32_MAX, last=False)
    if size > conn.max_job_size:  # checked before the trailing garbage
        conn._discard = size + 2
        return BadRequest(ErrorCode.JOB_TOO_BIG, f"{size} > {conn.max_job_size}")
    if pos != len(line):
        return BadRequest(ErrorCode.BAD_FORMAT, "put: garbage after the size", "cmd-put")
    conn._put = (pri, delay, ttr, size)
    return conn._read_body()


def _reserve_with_timeout(conn: ServerConnection, line: bytes, start: int) -> _Parsed:
    seconds = _strtol(line[start:], signed=True) or 0
    seconds = (seconds + 2**31) % 2**32 - 2**31  # beanstalkd keeps it in a C int
    return ReserveWithTimeout(U32_MAX if seconds < 0 else seconds)


def _release(conn: ServerConnection, line: bytes, start: int) -> _Parsed:
    job_id, pos = _read_uint(line, start, U64_MAX, last=False)
    pri, pos = _read_uint(line, pos, U32_MAX, last=False)
    return Release(job_id, pri, _read_uint(line, pos, U32_MAX, last=True)[0])


def _bury(conn: ServerConnection, line: bytes, start: int) -> _Parsed:
    job_id, pos = _read_uint(line, start, U64_MAX, last=False)
    return Bury(job_id, _read_uint(line, pos, U32_MAX, last=True)[0])


def _kick(conn: ServerConnection, line: bytes, start: int) -> _Parsed:
    count = _strtol(line[start:], signed=False)
    if count is None:
        raise _Malformed
    return Kick(count & U32_MAX)  # beanstalkd keeps it in a C unsigned int


def _pause_tube(conn: ServerConnection, line: bytes, start: int) -> _Parsed:
    pos, size = start, len(line)
    while pos < size and line[pos] == _SPACE:
        pos += 1
    end = pos
    while end < size and line[end] in _NAME_CHARS:
        end += 1
    if end == pos:
        raise _Malformed
    delay = _read_uint(line, end, U32_MAX, last=True)[0]
    try:  # counted before the name is checked
        return PauseTube(validate_tube(line[pos:end].decode("ascii")), delay)
    except LocalProtocolError:
        return BadRequest(ErrorCode.BAD_FORMAT, "pause-tube: invalid name", "cmd-pause-tube")


def _quit(conn: ServerConnection, line: bytes, start: int) -> _Parsed:
    return Quit()


_NAME_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()")

#: beanstalkd's ``which_cmd``: the first prefix the line starts with names the command.
_WHICH: tuple[tuple[bytes, _Parser], ...] = (
    (b"put ", _put),
    (b"peek ", _by_id(Peek)),
    (b"peek-ready", _exact(PeekReady())),
    (b"peek-delayed", _exact(PeekDelayed())),
    (b"peek-buried", _exact(PeekBuried())),
    (b"reserve-with-timeout ", _reserve_with_timeout),
    (b"reserve-job ", _by_id(ReserveJob)),
    (b"reserve", _exact(Reserve())),
    (b"delete ", _by_id(Delete)),
    (b"release ", _release),
    (b"bury ", _bury),
    (b"kick ", _kick),
    (b"kick-job ", _by_id(KickJob)),
    (b"touch ", _by_id(Touch)),
    (b"stats-job ", _by_id(StatsJob)),
    (b"stats-tube ", _by_tube(StatsTube)),
    (b"stats", _exact(Stats())),
    (b"use ", _by_tube(Use)),
    (b"watch ", _by_tube(Watch)),
    (b"ignore ", _by_tube(Ignore)),
    (b"list-tubes-watched", _exact(ListTubesWatched())),
    (b"list-tube-used", _exact(ListTubeUsed())),
    (b"list-tubes", _exact(ListTubes())),
    (b"quit", _quit),
    (b"pause-tube", _pause_tube),
)


def _trusted_put() -> Callable[[bytes, int, int, int], Put]:
    """A maker of ``Put`` events for fields the parser has already checked (a bytes body, three
    numbers within 32 bits): the same object the constructor builds, without checking again
    (the check costs more than the rest of a pipelined put). The constructor where ``Put`` is
    not a slotted class."""
    setters = [Put.__dict__.get(name) for name in ("body", "priority", "delay", "ttr")]
    if not all(isinstance(s, MemberDescriptorType) for s in setters):
        return Put  # pragma: no cover - Put is a slotted record
    body, priority, delay, ttr = (s.__set__ for s in setters)  # type: ignore[union-attr]
    new = object.__new__

    def put(data: bytes, pri: int, delay_s: int, ttr_s: int) -> Put:
        event = new(Put)
        body(event, data)
        priority(event, pri)
        delay(event, delay_s)
        ttr(event, ttr_s)
        return event

    return put


_make_put = _trusted_put()
#: The common put line: four plain numbers, one space apart, nothing after them. It is the
#: first line end of the buffer (no CR before it) and well inside its 224 bytes, so it is
#: read exactly as the general path reads it; every other form of put takes the general path.
_PUT_LINE = re.compile(rb"put ([0-9]{1,10} [0-9]{1,10} [0-9]{1,10}) ([0-9]{1,10})\r\n")


class ServerConnection:
    """The server role of one beanstalk connection. No I/O of its own.

    Args:
        max_job_size: largest body ``put`` may carry (beanstalkd's ``-z``; default 65535).
    """

    __slots__ = (
        "_data", "_discard", "_discarding_line", "_eof", "_fields", "_head", "_held",
        "_held_size", "_pos", "_put", "_wanted", "max_job_size",
    )

    def __init__(self, *, max_job_size: int = DEFAULT_MAX_JOB_SIZE) -> None:
        # The input not yet parsed is _data[_pos:] followed by the _held chunks.
        self._data = b""
        self._pos = 0
        # Chunks held back while a put body is incomplete, and their size: they are joined
        # once the body is all there (one copy, however many reads it took).
        self._held: list[bytes] = []
        self._held_size = 0
        self._wanted = 0  # bytes the awaited put body (and CRLF) needs buffered, or 0
        self._eof = False
        self._discard = 0  # body bytes of a too-big put still to drop
        self._discarding_line = False  # dropping 224-byte buffers of an over-long line
        self._put: tuple[int, int, int, int] | None = None  # a put whose body is awaited
        # The last common put's "<pri> <delay> <ttr>" and their values (next_put).
        self._head = b""
        self._fields = (0, 0, 0)
        self.max_job_size = max_job_size

    def receive_data(self, data: bytes) -> None:
        """Feed bytes read from the client; ``b""`` means the client closed (or half-closed).

        Raises:
            LocalProtocolError: bytes fed after ``b""`` (the rule of every core: the caller is
                out of step); nothing is fed.
        """
        if not data:
            self._eof = True
            return
        if self._eof:
            raise LocalProtocolError("receive_data after EOF")
        if type(data) is not bytes:
            data = bytes(data)
        if self._wanted:
            self._held.append(data)
            self._held_size += len(data)
            if len(self._data) - self._pos + self._held_size >= self._wanted:
                self._data = b"".join([self._data[self._pos :], *self._held])
                self._pos = 0
                self._held = []
                self._held_size = self._wanted = 0
        elif self._pos >= len(self._data):
            self._data = data
            self._pos = 0
        else:
            self._data = self._data[self._pos :] + data
            self._pos = 0

    @property
    def eof(self) -> bool:
        """True once the client has closed its sending side."""
        return self._eof

    @property
    def buffered(self) -> int:
        """Bytes received and not parsed yet."""
        return len(self._data) - self._pos + self._held_size

    @property
    def partial(self) -> bool:
        """True while part of a command is held: a line without its end, a ``put`` awaiting
        its body, an over-long line or a too-big body being dropped (the server's line
        timeout runs meanwhile)."""
        return bool(
            self._pos < len(self._data) or self._held or self._put is not None
            or self._discard or self._discarding_line
        )

    def send(self, reply: Reply) -> bytes:
        """The bytes of ``reply``."""
        return reply.encode()

    def next_event(self) -> Command[Reply] | BadRequest | ConnectionClosed | NeedData:
        """Return the next command, a ``BadRequest`` to answer, ``ConnectionClosed`` or
        :data:`NEED_DATA`. Never raises on client input: garbage becomes ``BadRequest``."""
        put = self.next_put()
        if put is not None:
            return _make_put(*put)
        if self._discard:
            self._discard -= self._drop(self._discard)
            if self._discard:
                return self._need()
        if self._put is not None:
            return self._read_body()
        line = self._next_line()
        if line is None:
            return self._need()
        if self._discarding_line:  # the end of an over-long line
            self._discarding_line = False
            return BadRequest(ErrorCode.BAD_FORMAT, f"line longer than {MAX_LINE} bytes")
        return self._parse(line)

    def next_put(self) -> tuple[bytes, int, int, int] | None:
        """The next command if it is a put in the common form (:data:`_PUT_LINE`) with its
        body and CRLF buffered: ``(body, priority, delay, ttr)``, consumed. ``None`` (nothing
        consumed) for anything else, which :meth:`next_event` reads.

        The server's fast path for pipelined puts (no ``Put`` event made); :meth:`next_event`
        reads the common put through it too, so both read it alike."""
        if self._discard or self._put is not None or self._discarding_line:
            return None
        data = self._data
        match = _PUT_LINE.match(data, self._pos)
        if match is None:
            return None
        head, raw_size = match.group(1, 2)
        if head == self._head:  # a producer's puts mostly share their priority, delay and TTR
            pri, delay, ttr = self._fields
        else:
            pri, delay, ttr = map(int, head.split())
            if pri > U32_MAX or delay > U32_MAX or ttr > U32_MAX:
                return None
            self._head, self._fields = head, (pri, delay, ttr)
        size = int(raw_size)
        start = match.end()
        end = start + size
        if size <= self.max_job_size and end + 2 <= len(data) and data[end] == _CR and (
            data[end + 1] == _LF
        ):
            self._pos = end + 2
            return data[start:end], pri, delay, ttr
        return None

    def _drop(self, n: int) -> int:
        """Drop up to ``n`` buffered bytes; return how many were dropped."""
        n = min(n, len(self._data) - self._pos)
        self._pos += n
        return n

    def _next_line(self) -> bytes | None:
        """The next line as beanstalkd's ``scan_line_end`` finds it in its 224-byte buffer:
        the buffer ends a line only at its first CR, and only if an LF follows within it. A full
        buffer with no line end is thrown away (and the line marked over-long)."""
        data = self._data
        pos = self._pos
        while True:
            size = min(len(data) - pos, MAX_LINE)
            cr = data.find(b"\r", pos, pos + size - 1)
            if cr >= 0 and data[cr + 1] == _LF:
                self._pos = cr + 2
                return data[pos:cr]
            if size < MAX_LINE:
                return None
            pos += MAX_LINE
            self._pos = pos
            self._discarding_line = True

    def _need(self) -> ConnectionClosed | NeedData:
        if self._eof:
            return ConnectionClosed(partial=self._pos < len(self._data) or bool(self._held))
        return NEED_DATA

    def _parse(self, line: bytes) -> _Parsed:
        if b"\0" in line:
            return BadRequest(ErrorCode.BAD_FORMAT, "NUL in the command line")
        for prefix, parse in _WHICH:
            if line.startswith(prefix):
                try:
                    return parse(self, line, len(prefix))
                except _Malformed:
                    return BadRequest(ErrorCode.BAD_FORMAT, f"malformed {prefix.decode()!r}")
        return BadRequest(ErrorCode.UNKNOWN_COMMAND, f"unknown command {line[:40]!r}")

    def _read_body(self) -> Command[Reply] | BadRequest | ConnectionClosed | NeedData:
        assert self._put is not None
        pri, delay, ttr, size = self._put
        pos = self._pos
        end = pos + size + 2
        if end > len(self._data):
            self._wanted = size + 2  # hold what comes until it is all there
            return self._need()
        self._pos = end
        self._put = None
        if self._data[end - 2 : end] != b"\r\n":
            return BadRequest(ErrorCode.EXPECTED_CRLF, "body not followed by CRLF")
        return _make_put(self._data[pos : end - 2], pri, delay, ttr)
