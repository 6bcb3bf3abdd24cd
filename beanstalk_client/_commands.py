"""What a client can send: one frozen record per beanstalkd 1.12 command (25 in all).

Constructing a command validates it, so nothing invalid can reach the wire: tube names must match
beanstalkd's charset and length, integers must be unsigned 32-bit (job ids unsigned 64-bit),
bodies must be bytes. A tube name with a space, CR or LF is refused here, which is what keeps
command injection out.

Each command class declares:

* ``reply``: the reply type that means success (``Command[R]`` is generic in it, so
  ``client.call(Put(...))`` is typed as returning :class:`Inserted`);
* ``accepts``: every reply word the server may answer it with; any other answer is a
  ``RemoteProtocolError`` (the stream is out of step).
"""

from __future__ import annotations

import re

from jobwire._record import record
from jobwire.errors import LocalProtocolError

from ._events import (
    GENERIC_CODES,
    BuriedReply,
    Deleted,
    ErrorCode,
    Found,
    Inserted,
    Kicked,
    Ok,
    Paused,
    Released,
    Reply,
    Reserved,
    Touched,
    Using,
    Watching,
    slot_setter,
)

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import ClassVar, Generic, TypeVar
else:
    from jobwire._typing import Generic, TypeVar

__all__ = [
    "MAX_LINE",
    "MAX_TUBE_NAME",
    "Bury",
    "Command",
    "Delete",
    "Ignore",
    "Kick",
    "KickJob",
    "ListTubeUsed",
    "ListTubes",
    "ListTubesWatched",
    "PauseTube",
    "Peek",
    "PeekBuried",
    "PeekDelayed",
    "PeekReady",
    "Put",
    "Quit",
    "Release",
    "Reserve",
    "ReserveJob",
    "ReserveWithTimeout",
    "Stats",
    "StatsJob",
    "StatsTube",
    "Touch",
    "Use",
    "Watch",
    "validate_tube",
]

#: Longest command or reply line beanstalkd accepts, CRLF included.
MAX_LINE = 224
#: Longest tube name, in bytes.
MAX_TUBE_NAME = 200
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
#: The priority used when none is given (as greenstalk and beaneater do); 0 is most urgent.
DEFAULT_PRIORITY = 2**16
#: The time-to-run used when none is given, in seconds.
DEFAULT_TTR = 60

_TUBE_RE = re.compile(r"[A-Za-z0-9+/;.$_()][A-Za-z0-9\-+/;.$_()]*")

R_co = TypeVar("R_co", bound=Reply, covariant=True)


def validate_tube(name: object) -> str:
    """Return ``name`` if it is a valid tube name.

    Raises:
        LocalProtocolError: not a ``str``, empty, longer than 200 bytes, starting with ``-``, or
            holding a character outside ``A-Z a-z 0-9 - + / ; . $ _ ( )`` (spaces, CR and LF
            included).
    """
    if not isinstance(name, str):
        raise LocalProtocolError(f"tube name must be str, not {type(name).__name__}")
    if not 1 <= len(name) <= MAX_TUBE_NAME:
        raise LocalProtocolError(f"tube name must be 1-{MAX_TUBE_NAME} bytes, got {len(name)}")
    if _TUBE_RE.fullmatch(name) is None:
        if name.startswith("-"):
            raise LocalProtocolError(f"tube name may not start with '-': {name!r}")
        raise LocalProtocolError(
            f"tube name {name!r} has a character outside A-Za-z0-9 and -+/;.$_()"
        )
    return name


def _check_int(what: str, value: object, high: int) -> int:
    if type(value) is int and 0 <= value <= high:  # the common case, first
        return value
    if not isinstance(value, int) or isinstance(value, bool):
        raise LocalProtocolError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value <= high:
        raise LocalProtocolError(f"{what} must be in 0..{high}, got {value}")
    return value


def _u32(what: str, value: object) -> int:
    return _check_int(what, value, U32_MAX)


def _job_id(value: object) -> int:
    return _check_int("job id", value, U64_MAX)


class Command(Generic[R_co]):
    """Base class of commands; ``R_co`` is the reply type that means success."""

    __slots__ = ()
    #: The command word on the wire.
    name: ClassVar[str]
    #: The success reply type.
    reply: ClassVar[type[Reply]]
    #: Every reply word this command may be answered with.
    accepts: ClassVar[frozenset[bytes]]

    def encode(self) -> bytes:
        """The command line (and body) exactly as written to the socket."""
        return self.name.encode() + b"\r\n"


def _accepts(*words: str) -> frozenset[bytes]:
    return frozenset(w.encode() for w in words) | {code.value.encode() for code in GENERIC_CODES}


_NF = ErrorCode.NOT_FOUND.value


# -- producer commands -------------------------------------------------------------------------


@record(init=False)
class Put(Command[Inserted]):
    """``put <pri> <delay> <ttr> <bytes>`` and the body, into the used tube."""

    body: bytes
    priority: int = DEFAULT_PRIORITY
    delay: int = 0
    ttr: int = DEFAULT_TTR

    name = "put"
    reply = Inserted
    accepts = _accepts(
        "INSERTED", "BURIED", "EXPECTED_CRLF", "JOB_TOO_BIG", "DRAINING"
    )

    def __init__(
        self, body: bytes, priority: int = DEFAULT_PRIORITY, delay: int = 0,
        ttr: int = DEFAULT_TTR,
    ) -> None:
        # One test in the common case; the full checks, with their messages, otherwise.
        if not (
            type(body) is bytes
            and type(priority) is int and 0 <= priority <= U32_MAX
            and type(delay) is int and 0 <= delay <= U32_MAX
            and type(ttr) is int and 0 <= ttr <= U32_MAX
        ):
            if not isinstance(body, bytes):
                raise LocalProtocolError(
                    f"job body must be bytes, not {type(body).__name__} (encode it first)"
                )
            _u32("priority", priority)
            _u32("delay", delay)
            _u32("ttr", ttr)
        _set_put_body(self, body)
        _set_put_priority(self, priority)
        _set_put_delay(self, delay)
        _set_put_ttr(self, ttr)

    def encode(self) -> bytes:
        return b"put %d %d %d %d\r\n%b\r\n" % (
            self.priority,
            self.delay,
            self.ttr,
            len(self.body),
            self.body,
        )


_set_put_body = slot_setter(Put, "body")
_set_put_priority = slot_setter(Put, "priority")
_set_put_delay = slot_setter(Put, "delay")
_set_put_ttr = slot_setter(Put, "ttr")


@record
class Use(Command[Using]):
    """``use <tube>``: later puts go to ``tube``."""

    tube: str
    name = "use"
    reply = Using
    accepts = _accepts("USING")

    def __post_init__(self) -> None:
        validate_tube(self.tube)

    def encode(self) -> bytes:
        return b"use " + self.tube.encode() + b"\r\n"


# -- worker commands ---------------------------------------------------------------------------


@record
class Reserve(Command[Reserved]):
    """``reserve``: wait for a job from the watched tubes, with no time limit."""

    name = "reserve"
    reply = Reserved
    accepts = _accepts("RESERVED", "DEADLINE_SOON", "TIMED_OUT")

    def encode(self) -> bytes:
        return b"reserve\r\n"


@record
class ReserveWithTimeout(Command[Reserved]):
    """``reserve-with-timeout <seconds>``: wait at most ``seconds`` (0 = answer at once)."""

    seconds: int
    name = "reserve-with-timeout"
    reply = Reserved
    accepts = _accepts("RESERVED", "DEADLINE_SOON", "TIMED_OUT")

    def __post_init__(self) -> None:
        if not (type(self.seconds) is int and 0 <= self.seconds <= U32_MAX):
            _u32("reserve timeout", self.seconds)

    def encode(self) -> bytes:
        return b"reserve-with-timeout %d\r\n" % self.seconds


@record
class ReserveJob(Command[Reserved]):
    """``reserve-job <id>``: reserve a ready, delayed or buried job by id (beanstalkd 1.12+)."""

    job_id: int
    name = "reserve-job"
    reply = Reserved
    accepts = _accepts("RESERVED", _NF)

    def __post_init__(self) -> None:
        if not (type(self.job_id) is int and 0 <= self.job_id <= U64_MAX):
            _job_id(self.job_id)

    def encode(self) -> bytes:
        return b"reserve-job %d\r\n" % self.job_id


@record(init=False)
class Delete(Command[Deleted]):
    """``delete <id>``."""

    job_id: int
    name = "delete"
    reply = Deleted
    accepts = _accepts("DELETED", _NF)

    def __init__(self, job_id: int) -> None:
        if not (type(job_id) is int and 0 <= job_id <= U64_MAX):
            _job_id(job_id)
        _set_delete_id(self, job_id)

    def encode(self) -> bytes:
        return b"delete %d\r\n" % self.job_id


_set_delete_id = slot_setter(Delete, "job_id")


@record
class Release(Command[Released]):
    """``release <id> <pri> <delay>``."""

    job_id: int
    priority: int = DEFAULT_PRIORITY
    delay: int = 0
    name = "release"
    reply = Released
    accepts = _accepts("RELEASED", "BURIED", _NF)

    def __post_init__(self) -> None:
        if not (
            type(self.job_id) is int and 0 <= self.job_id <= U64_MAX
            and type(self.priority) is int and 0 <= self.priority <= U32_MAX
            and type(self.delay) is int and 0 <= self.delay <= U32_MAX
        ):
            _job_id(self.job_id)
            _u32("priority", self.priority)
            _u32("delay", self.delay)

    def encode(self) -> bytes:
        return b"release %d %d %d\r\n" % (self.job_id, self.priority, self.delay)


@record
class Bury(Command[BuriedReply]):
    """``bury <id> <pri>``."""

    job_id: int
    priority: int = DEFAULT_PRIORITY
    name = "bury"
    reply = BuriedReply
    accepts = _accepts("BURIED", _NF)

    def __post_init__(self) -> None:
        if not (
            type(self.job_id) is int and 0 <= self.job_id <= U64_MAX
            and type(self.priority) is int and 0 <= self.priority <= U32_MAX
        ):
            _job_id(self.job_id)
            _u32("priority", self.priority)

    def encode(self) -> bytes:
        return b"bury %d %d\r\n" % (self.job_id, self.priority)


@record
class Touch(Command[Touched]):
    """``touch <id>``: restart the TTR of a job this connection holds."""

    job_id: int
    name = "touch"
    reply = Touched
    accepts = _accepts("TOUCHED", _NF)

    def __post_init__(self) -> None:
        if not (type(self.job_id) is int and 0 <= self.job_id <= U64_MAX):
            _job_id(self.job_id)

    def encode(self) -> bytes:
        return b"touch %d\r\n" % self.job_id


@record
class Watch(Command[Watching]):
    """``watch <tube>``."""

    tube: str
    name = "watch"
    reply = Watching
    accepts = _accepts("WATCHING")

    def __post_init__(self) -> None:
        validate_tube(self.tube)

    def encode(self) -> bytes:
        return b"watch " + self.tube.encode() + b"\r\n"


@record
class Ignore(Command[Watching]):
    """``ignore <tube>``."""

    tube: str
    name = "ignore"
    reply = Watching
    accepts = _accepts("WATCHING", "NOT_IGNORED")

    def __post_init__(self) -> None:
        validate_tube(self.tube)

    def encode(self) -> bytes:
        return b"ignore " + self.tube.encode() + b"\r\n"


# -- other commands ----------------------------------------------------------------------------


@record
class Peek(Command[Found]):
    """``peek <id>``."""

    job_id: int
    name = "peek"
    reply = Found
    accepts = _accepts("FOUND", _NF)

    def __post_init__(self) -> None:
        if not (type(self.job_id) is int and 0 <= self.job_id <= U64_MAX):
            _job_id(self.job_id)

    def encode(self) -> bytes:
        return b"peek %d\r\n" % self.job_id


@record
class PeekReady(Command[Found]):
    """``peek-ready``: the next ready job in the used tube."""

    name = "peek-ready"
    reply = Found
    accepts = _accepts("FOUND", _NF)


@record
class PeekDelayed(Command[Found]):
    """``peek-delayed``: the delayed job with the shortest delay left in the used tube."""

    name = "peek-delayed"
    reply = Found
    accepts = _accepts("FOUND", _NF)


@record
class PeekBuried(Command[Found]):
    """``peek-buried``: the next buried job in the used tube."""

    name = "peek-buried"
    reply = Found
    accepts = _accepts("FOUND", _NF)


@record
class Kick(Command[Kicked]):
    """``kick <bound>``: kick up to ``bound`` buried (else delayed) jobs in the used tube."""

    bound: int
    name = "kick"
    reply = Kicked
    accepts = _accepts("KICKED")

    def __post_init__(self) -> None:
        _u32("kick bound", self.bound)

    def encode(self) -> bytes:
        return b"kick %d\r\n" % self.bound


@record
class KickJob(Command[Kicked]):
    """``kick-job <id>``: make one buried or delayed job ready."""

    job_id: int
    name = "kick-job"
    reply = Kicked
    accepts = _accepts("KICKED", _NF)

    def __post_init__(self) -> None:
        if not (type(self.job_id) is int and 0 <= self.job_id <= U64_MAX):
            _job_id(self.job_id)

    def encode(self) -> bytes:
        return b"kick-job %d\r\n" % self.job_id


@record
class StatsJob(Command[Ok]):
    """``stats-job <id>``."""

    job_id: int
    name = "stats-job"
    reply = Ok
    accepts = _accepts("OK", _NF)

    def __post_init__(self) -> None:
        if not (type(self.job_id) is int and 0 <= self.job_id <= U64_MAX):
            _job_id(self.job_id)

    def encode(self) -> bytes:
        return b"stats-job %d\r\n" % self.job_id


@record
class StatsTube(Command[Ok]):
    """``stats-tube <tube>``."""

    tube: str
    name = "stats-tube"
    reply = Ok
    accepts = _accepts("OK", _NF)

    def __post_init__(self) -> None:
        validate_tube(self.tube)

    def encode(self) -> bytes:
        return b"stats-tube " + self.tube.encode() + b"\r\n"


@record
class Stats(Command[Ok]):
    """``stats``: server-wide statistics."""

    name = "stats"
    reply = Ok
    accepts = _accepts("OK")


@record
class ListTubes(Command[Ok]):
    """``list-tubes``."""

    name = "list-tubes"
    reply = Ok
    accepts = _accepts("OK")


@record
class ListTubeUsed(Command[Using]):
    """``list-tube-used``."""

    name = "list-tube-used"
    reply = Using
    accepts = _accepts("USING")


@record
class ListTubesWatched(Command[Ok]):
    """``list-tubes-watched``."""

    name = "list-tubes-watched"
    reply = Ok
    accepts = _accepts("OK")


@record
class PauseTube(Command[Paused]):
    """``pause-tube <tube> <delay>``: no reserves from ``tube`` for ``delay`` seconds."""

    tube: str
    delay: int
    name = "pause-tube"
    reply = Paused
    accepts = _accepts("PAUSED", _NF)

    def __post_init__(self) -> None:
        validate_tube(self.tube)
        _u32("pause delay", self.delay)

    def encode(self) -> bytes:
        return b"pause-tube %b %d\r\n" % (self.tube.encode(), self.delay)


@record
class Quit(Command[Reply]):
    """``quit``: the server closes the connection; there is no reply."""

    name = "quit"
    reply = Reply
    accepts = frozenset()


#: Every command class by its wire name.
COMMANDS: dict[str, type[Command[Reply]]] = {
    cls.name: cls
    for cls in (
        Put, Use, Reserve, ReserveWithTimeout, ReserveJob, Delete, Release, Bury, Touch, Watch,
        Ignore, Peek, PeekReady, PeekDelayed, PeekBuried, Kick, KickJob, StatsJob, StatsTube,
        Stats, ListTubes, ListTubeUsed, ListTubesWatched, PauseTube, Quit,
    )
}
assert len(COMMANDS) == 25
