"""The server side of the beanstalk protocol as a Sans-IO state machine.

Bytes in, commands out; replies in, bytes out. It reproduces how beanstalkd 1.12 frames input
(see ``../shared/transcripts/beanstalkd-1.12.jsonl``):

* a line longer than 224 bytes gets one ``BAD_FORMAT`` and the parser resynchronises at the next
  CRLF;
* an unknown command word (the empty line included) is ``UNKNOWN_COMMAND``; a known word with bad
  arguments is ``BAD_FORMAT``; in both cases nothing more is read for that line, so a body that
  followed is read as the next command, as beanstalkd does;
* ``put`` with a field over 2**32-1 is ``BAD_FORMAT`` before any body is read (the body then
  reads as a command, as in beanstalkd);
* ``put`` with a body larger than ``max_job_size`` is ``JOB_TOO_BIG`` and the body (plus CRLF) is
  discarded, keeping the connection usable;
* ``put`` whose body is not followed by CRLF is ``EXPECTED_CRLF`` after ``<bytes>+2`` bytes are
  consumed, and what follows is read as a new command;
* ``reserve-with-timeout`` takes any signed 64-bit number: a negative one blocks like
  ``reserve`` (1.12 behaviour), one past 2**32-1 waits 2**32-1 s (both count as
  ``cmd-reserve-with-timeout``);
* ``kick`` reads its count as C's ``strtoumax`` does and keeps the low 32 bits: ``kick -1``
  kicks up to 2**32-1 jobs, ``kick 4294967296`` kicks none (``KICKED 0``);
* ``quit`` followed by anything closes the connection (beanstalkd matches it by prefix).

Validation of names and numbers reuses the command classes' own checks, so the client and the
server agree by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobwire._buffer import LineTooLong, ReceiveBuffer
from jobwire.errors import LocalProtocolError

from ._commands import (
    COMMANDS,
    MAX_LINE,
    U32_MAX,
    U64_MAX,
    Command,
    Kick,
    Put,
    Quit,
    ReserveWithTimeout,
)
from ._events import NEED_DATA, ConnectionClosed, ErrorCode, Event, NeedData, Reply

__all__ = ["BadRequest", "ServerConnection"]

DEFAULT_MAX_JOB_SIZE = 65535


@dataclass(frozen=True, slots=True)
class BadRequest(Event):
    """Input the server must answer with an error reply (``code``) instead of running it."""

    code: ErrorCode
    detail: str = ""


def _uint(raw: bytes) -> int:
    if not raw.isdigit() or len(raw) > 20:
        raise ValueError(raw)
    return int(raw)


def _signed(raw: bytes) -> int:
    """A signed 64-bit decimal, as ``strtoll`` without its leniency about spaces."""
    digits = raw[1:] if raw.startswith(b"-") else raw
    value = _uint(digits)
    value = -value if raw.startswith(b"-") else value
    if not -(2**63) <= value < 2**63:
        raise ValueError(raw)
    return value


def _strtoumax(raw: bytes) -> int:
    """An unsigned 64-bit decimal as C's ``strtoumax`` reads it: a leading ``-`` negates it
    modulo 2**64 (``-1`` is 2**64-1); past 2**64-1 is an error."""
    negative = raw.startswith(b"-")
    value = _uint(raw[1:] if negative else raw)
    if value > U64_MAX:
        raise ValueError(raw)
    return (-value) % 2**64 if negative else value


# How many arguments each command takes, and how to turn them into constructor arguments.
_ARITY: dict[str, int] = {
    "put": 4, "use": 1, "reserve": 0, "reserve-with-timeout": 1, "reserve-job": 1, "delete": 1,
    "release": 3, "bury": 2, "touch": 1, "watch": 1, "ignore": 1, "peek": 1, "peek-ready": 0,
    "peek-delayed": 0, "peek-buried": 0, "kick": 1, "kick-job": 1, "stats-job": 1,
    "stats-tube": 1, "stats": 0, "list-tubes": 0, "list-tube-used": 0, "list-tubes-watched": 0,
    "pause-tube": 2, "quit": 0,
}
_NAME_ARGS = {"use", "watch", "ignore", "stats-tube", "pause-tube"}
_NO_ARGS = tuple(name for name, arity in _ARITY.items() if arity == 0)


class ServerConnection:
    """The server role of one beanstalk connection. No I/O of its own.

    Args:
        max_job_size: largest body ``put`` may carry (beanstalkd's ``-z``; default 65535).
    """

    __slots__ = ("_buffer", "_discard", "_discarding_line", "_eof", "_put", "max_job_size")

    def __init__(self, *, max_job_size: int = DEFAULT_MAX_JOB_SIZE) -> None:
        self._buffer = ReceiveBuffer()
        self._eof = False
        self._discard = 0  # body bytes of a too-big put still to drop
        self._discarding_line = False  # dropping the rest of an over-long line
        self._put: tuple[int, int, int, int] | None = None  # a put whose body is awaited
        self.max_job_size = max_job_size

    def receive_data(self, data: bytes) -> None:
        """Feed bytes read from the client; ``b""`` means the client closed (or half-closed)."""
        if data:
            self._buffer.feed(data)
        else:
            self._eof = True

    @property
    def eof(self) -> bool:
        """True once the client has closed its sending side."""
        return self._eof

    def send(self, reply: Reply) -> bytes:
        """The bytes of ``reply``."""
        return reply.encode()

    def next_event(self) -> Command[Reply] | BadRequest | ConnectionClosed | NeedData:
        """Return the next command, a ``BadRequest`` to answer, ``ConnectionClosed`` or
        :data:`NEED_DATA`. Never raises on client input: garbage becomes ``BadRequest``."""
        buffer = self._buffer
        if self._discard:
            self._discard -= buffer.discard(self._discard)
            if self._discard:
                return self._need()
        if self._discarding_line:
            if not buffer.discard_through_crlf():
                return self._need()
            self._discarding_line = False
            return BadRequest(ErrorCode.BAD_FORMAT, f"line longer than {MAX_LINE} bytes")
        if self._put is not None:
            return self._read_body()
        try:
            line = buffer.extract_line(MAX_LINE)
        except LineTooLong:
            self._discarding_line = True
            return self.next_event()
        if line is None:
            return self._need()
        return self._parse(line)

    def _need(self) -> ConnectionClosed | NeedData:
        return ConnectionClosed(partial=bool(self._buffer)) if self._eof else NEED_DATA

    def _parse(self, line: bytes) -> Command[Reply] | BadRequest | ConnectionClosed | NeedData:
        words = line.split(b" ")
        try:
            name = words[0].decode("ascii")
        except UnicodeDecodeError:
            return BadRequest(ErrorCode.UNKNOWN_COMMAND, "non-ASCII command")
        cls = COMMANDS.get(name)
        if cls is None:
            return BadRequest(ErrorCode.UNKNOWN_COMMAND, f"unknown command {name!r}")
        args = words[1:]
        if name == "quit":
            return Quit()
        if not args and _ARITY[name]:
            # beanstalkd matches command words by prefix, "use " with its space: a bare "use"
            # is unknown, but a bare "stats-job" matches "stats" and is then malformed.
            if any(name.startswith(bare) for bare in _NO_ARGS):
                return BadRequest(ErrorCode.BAD_FORMAT, f"{name} without its arguments")
            return BadRequest(ErrorCode.UNKNOWN_COMMAND, f"{name} without its arguments")
        if len(args) != _ARITY[name]:
            return BadRequest(ErrorCode.BAD_FORMAT, f"{name} takes {_ARITY[name]} arguments")
        try:
            if name == "put":
                pri, delay, ttr, size = (_uint(a) for a in args)
                if max(pri, delay, ttr, size) > U32_MAX:  # beanstalkd's read_u32 fails first
                    return BadRequest(ErrorCode.BAD_FORMAT, "put field over 2**32-1")
                if size > self.max_job_size:
                    self._discard = size + 2
                    return BadRequest(ErrorCode.JOB_TOO_BIG, f"{size} > {self.max_job_size}")
                self._put = (pri, delay, ttr, size)
                return self._read_body()
            if name == "reserve-with-timeout":
                seconds = _signed(args[0])
                return ReserveWithTimeout(U32_MAX if seconds < 0 else min(seconds, U32_MAX))
            if name == "kick":
                return Kick(_strtoumax(args[0]) & U32_MAX)
            values: list[object] = []
            for i, arg in enumerate(args):
                if name in _NAME_ARGS and i == 0:
                    values.append(arg.decode("ascii"))
                else:
                    values.append(_uint(arg))
            if name == "reserve-with-timeout":
                return ReserveWithTimeout(*values)  # type: ignore[arg-type]
            return cls(*values)
        except (ValueError, UnicodeDecodeError, LocalProtocolError) as exc:
            return BadRequest(ErrorCode.BAD_FORMAT, f"{name}: {exc}")

    def _read_body(self) -> Command[Reply] | BadRequest | ConnectionClosed | NeedData:
        assert self._put is not None
        pri, delay, ttr, size = self._put
        chunk = self._buffer.extract_exactly(size + 2)
        if chunk is None:
            return self._need()
        self._put = None
        if not chunk.endswith(b"\r\n"):
            return BadRequest(ErrorCode.EXPECTED_CRLF, "body not followed by CRLF")
        try:
            return Put(chunk[:-2], pri, delay, ttr)
        except LocalProtocolError as exc:
            return BadRequest(ErrorCode.BAD_FORMAT, str(exc))
