"""What a client can send: one frozen record per Workq command.

Constructing a command validates it, so nothing invalid can reach the wire: ids must be UUID
version 4 (they are generated when not given and written in canonical lower-case form), names
must match ``[a-zA-Z0-9_.-]{1,255}`` (which keeps spaces, CR, LF and NUL -- command injection --
out), payloads and results are at most 1 MiB, and every number must be in the range the Workq
0.2.0 server accepts (docs/workq.md). Numbers here are in the wire's units: milliseconds; the client
API converts seconds.

Each validation error is an :class:`InvalidArgument`: a ``LocalProtocolError`` that also carries
the text the Workq server answers the same mistake with, so the bundled server reuses these checks
and client and server agree by construction.

Each command class declares ``shape``: which success reply answers it (``_protocol.py`` reads the
reply by that shape), and ``has_payload``: whether a data block follows the command line (a
``-CLIENT-ERROR`` to such a command may leave the server out of step, docs/workq.md).

:class:`EncodedAdd` is the clients' own ``add``: checked exactly as :class:`Add` is, but kept as
its id and its bytes only (the clients' hot path, docs/workq.md "What an add costs").
"""

from __future__ import annotations

import enum
import math
import os
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone

from jobwire._ids import VARIANT, pooled
from jobwire._record import record
from jobwire.errors import LocalProtocolError

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import ClassVar, Final

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_FAILS",
    "MAX_LIMIT",
    "MAX_PAYLOAD",
    "MAX_TTL_MS",
    "MAX_TTR_MS",
    "MAX_WAIT_MS",
    "MIN_LEASE_WAIT_MS",
    "REFUSED_TOTALS",
    "Add",
    "Command",
    "Complete",
    "Delete",
    "EncodedAdd",
    "Fail",
    "InspectJob",
    "InspectJobs",
    "InspectQueue",
    "InspectQueues",
    "InspectScheduledJobs",
    "InspectServer",
    "InvalidArgument",
    "Lease",
    "Result",
    "Run",
    "Schedule",
    "Shape",
    "format_time",
    "new_id",
    "new_ids",
    "parse_time",
    "to_ms",
    "validate_id",
    "validate_name",
]

#: Largest payload or result, in bytes (1 MiB).
MAX_PAYLOAD: Final = 1_048_576
#: Largest time-to-run: 24 hours, in ms.
MAX_TTR_MS: Final = 86_400_000
#: Largest time-to-live: 30 days, in ms (docs/workq.md; the document's 2**64-1 is wrong).
MAX_TTL_MS: Final = 2_592_000_000
#: Largest wait-timeout of lease, run and result: 24 hours, in ms.
MAX_WAIT_MS: Final = 86_400_000
#: The smallest wait-timeout with which Workq 0.2.0 leases a job that is ready: with 0 its
#: timer beats the hand-off and it answers ``-TIMEOUT`` even with jobs ready (docs/workq.md).
#: The clients send this for ``lease(wait=0)``.
MIN_LEASE_WAIT_MS: Final = 1
#: Encoded sizes (command line, data block and their CRLFs) at which Workq 0.2.0 refuses a
#: command that carries a data block, even with nothing else in flight: it reads through a
#: 4096-byte buffer and reads the block's CRLF with one 2-byte read, which returns only the CR
#: when the buffer ends between them (docs/workq.md). The clients write such a command with
#: one more space after its verb (the server skips empty tokens); the bundled server refuses
#: them as Workq does.
REFUSED_TOTALS: Final = frozenset({4097, 8193})
#: Largest max-attempts (0 means unlimited).
MAX_ATTEMPTS: Final = 255
#: Largest max-fails (0 means unlimited).
MAX_FAILS: Final = 255
#: Largest ``limit`` of ``inspect jobs``/``scheduled-jobs``/``queues``.
MAX_LIMIT: Final = 100
#: Largest cursor offset.
MAX_OFFSET: Final = 2**32 - 1
#: Longest job or queue name, in bytes.
MAX_NAME: Final = 255
#: The range of a priority: a signed 32-bit integer, higher runs first.
I32_MIN: Final = -(2**31)
I32_MAX: Final = 2**31 - 1

_NAME_RE = re.compile(r"[a-zA-Z0-9_.\-]{1,255}")
#: A UUIDv4 (RFC 4122 variant) already in canonical lower-case form: taken as it is.
_CANONICAL_V4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
#: Names already found valid (plain ``str`` only), so the common case costs one set lookup.
_KNOWN_NAMES: set[str] = set()
_KNOWN_NAMES_MAX = 4096
TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"


class InvalidArgument(LocalProtocolError):
    """An argument the server would refuse; ``server_text`` is the server's error text for it."""

    def __init__(self, message: str, server_text: str) -> None:
        super().__init__(message)
        self.server_text = server_text


class Shape(enum.Enum):
    """The success reply a command expects."""

    #: ``+OK``
    OK = "OK"
    #: ``+OK 1`` and one ``<id> <success> <size>`` result block.
    RESULT = "RESULT"
    #: ``+OK 1`` and one ``<id> <name> <ttr> <size>`` job block.
    LEASE = "LEASE"
    #: ``+OK <n>`` and job records (whose ``payload`` value is read by length).
    JOBS = "JOBS"
    #: ``+OK <n>`` and queue records.
    QUEUES = "QUEUES"
    #: ``+OK 1`` and the ``server`` record (whose key count is wrong in Workq 0.2.0).
    SERVER = "SERVER"


# -- validators (shared with the bundled server) ----------------------------------------------


def new_ids(count: int) -> list[str]:
    """``count`` fresh random UUIDv4s in canonical form from one ``os.urandom`` call: 122
    random bits each (what ``uuid.uuid4()`` reads), with the version and variant bits set as
    ``uuid.uuid4()`` sets them."""
    h = os.urandom(16 * count).hex()
    return [f"{h[i:i + 8]}-{h[i + 8:i + 12]}-4{h[i + 13:i + 16]}-{VARIANT[h[i + 16]]}"
            f"{h[i + 17:i + 20]}-{h[i + 20:i + 32]}" for i in range(0, 32 * count, 32)]


#: A fresh random UUIDv4 in canonical form, as :func:`new_ids` makes them (a batch at a time:
#: ``jobwire._ids``).
new_id: Callable[[], str] = pooled(new_ids)


def validate_id(value: object) -> str:
    """Return ``value`` (a ``str`` or ``uuid.UUID``) as a canonical lower-case UUIDv4 string.

    Raises:
        InvalidArgument: not a UUID, or not version 4.
    """
    if type(value) is str and _CANONICAL_V4.fullmatch(value) is not None:
        return value  # the common case: already canonical
    import uuid  # not before: it imports platform, about 2 ms of a bundled server's start

    if isinstance(value, uuid.UUID):
        parsed = value
    elif isinstance(value, str):
        if len(value) > 64 or not value.isascii():
            raise InvalidArgument(f"job id is not a UUID: {value[:64]!r}", "Invalid ID")
        try:
            parsed = uuid.UUID(value)
        except ValueError:
            raise InvalidArgument(f"job id is not a UUID: {value!r}", "Invalid ID") from None
    else:
        raise InvalidArgument(
            f"job id must be a str or UUID, not {type(value).__name__}", "Invalid ID"
        )
    if parsed.version != 4 or parsed.variant != uuid.RFC_4122:
        raise InvalidArgument(f"job id must be a UUID version 4: {value}", "Invalid ID")
    return str(parsed)


def validate_name(value: object) -> str:
    """Return ``value`` if it is a valid job/queue name: ``[a-zA-Z0-9_.-]``, 1-255 characters.

    Raises:
        InvalidArgument: not a ``str``, empty, too long, or a character outside that set
            (spaces, CR, LF and NUL included).
    """
    if type(value) is str and value in _KNOWN_NAMES:
        return value
    if not isinstance(value, str):
        raise InvalidArgument(f"name must be str, not {type(value).__name__}", "Invalid name")
    if _NAME_RE.fullmatch(value) is None:
        if not 1 <= len(value) <= MAX_NAME:
            raise InvalidArgument(f"name must be 1-{MAX_NAME} characters, got {len(value)}",
                                  "Invalid name")
        raise InvalidArgument(f"name {value[:80]!r} has a character outside a-zA-Z0-9_.-",
                              "Invalid name")
    if type(value) is str and len(_KNOWN_NAMES) < _KNOWN_NAMES_MAX:
        _KNOWN_NAMES.add(value)
    return value


def _int(what: str, value: object, low: int, high: int, server_text: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{what} must be an int, not {type(value).__name__}", server_text)
    if not low <= value <= high:
        raise InvalidArgument(f"{what} must be in {low}..{high}, got {value}", server_text)
    return value


def _data(what: str, value: object, server_text: str) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"{what} must be bytes, not {type(value).__name__}", server_text)
    data = bytes(value)
    if len(data) > MAX_PAYLOAD:
        raise InvalidArgument(f"{what} of {len(data)} bytes is over {MAX_PAYLOAD}", server_text)
    return data


def to_ms(what: str, value: float | timedelta) -> int:
    """Seconds (``int``, ``float`` or ``timedelta``) as whole milliseconds, rounded up.

    Raises:
        LocalProtocolError: not a number, negative, NaN or infinite.
    """
    if type(value) is int:
        if value >= 0:
            return value * 1000  # exact, however large (the range checks refuse too large)
    elif type(value) is float and 0 <= value < math.inf:  # the common case; NaN fails here too
        ms = value * 1000
        if ms.is_integer():
            return int(ms)
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int) and not isinstance(value, bool):  # an int subclass: exact
        if value < 0:
            raise LocalProtocolError(f"{what} must be a finite number of seconds >= 0, got {value}")
        return int(value) * 1000
    elif isinstance(value, float):
        seconds = float(value)
    else:
        raise LocalProtocolError(f"{what} must be seconds (float) or a timedelta, "
                                 f"not {type(value).__name__}")
    if math.isnan(seconds) or math.isinf(seconds) or seconds < 0:
        raise LocalProtocolError(f"{what} must be a finite number of seconds >= 0, got {value}")
    ms = seconds * 1000
    if math.isinf(ms):
        raise LocalProtocolError(f"{what} of {value} seconds is out of range")
    # Round up, after removing float noise (0.3 s is 300 ms, not 301).
    return math.ceil(round(ms, 6))


def format_time(value: datetime) -> str:
    """An aware datetime as the wire's UTC ``YYYY-MM-DDTHH:MM:SSZ``, rounded up to the second
    (a job is never scheduled earlier than asked).

    Raises:
        LocalProtocolError: a naive datetime, or a year outside 1-9999 once in UTC.
    """
    if not isinstance(value, datetime):
        raise LocalProtocolError(f"time must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise LocalProtocolError("time must be an aware datetime (with a tzinfo)")
    try:
        utc = value.astimezone(timezone.utc)
        if utc.microsecond:
            utc = utc.replace(microsecond=0) + timedelta(seconds=1)
    except OverflowError:
        raise LocalProtocolError(f"time out of range: {value}") from None
    return utc.strftime(TIME_FORMAT) if utc.year >= 1000 else utc.isoformat()[:19] + "Z"


def parse_time(raw: str) -> datetime:
    """Parse the wire's ``YYYY-MM-DDTHH:MM:SSZ`` into an aware UTC datetime.

    Raises:
        ValueError: another format.
    """
    if len(raw) != 20 or not raw.isascii():
        raise ValueError(f"bad time {raw[:40]!r}")
    return datetime.strptime(raw, TIME_FORMAT).replace(tzinfo=timezone.utc)


_set = object.__setattr__  # fields of frozen commands, set while they are built


def _flags(priority: int, max_attempts: int | None = None, max_fails: int | None = None) -> bytes:
    out = b""
    if priority:
        out += b" -priority=%d" % priority
    if max_attempts:
        out += b" -max-attempts=%d" % max_attempts
    if max_fails:
        out += b" -max-fails=%d" % max_fails
    return out


def _fit(wire: bytes, verb: bytes) -> bytes:
    """``wire`` (a command with a data block, starting ``verb`` and a space), with one more
    space after ``verb`` when its size is one Workq 0.2.0 refuses (:data:`REFUSED_TOTALS`)."""
    if len(wire) in REFUSED_TOTALS:
        return verb + b" " + wire[len(verb):]
    return wire


# -- commands ----------------------------------------------------------------------------------


class Command:
    """Base class of commands."""

    __slots__ = ()
    #: The command word(s) on the wire.
    verb: ClassVar[str]
    #: The success reply that answers it.
    shape: ClassVar[Shape] = Shape.OK
    #: A data block follows the command line.
    has_payload: ClassVar[bool] = False
    #: The server may hold the reply back for this many ms (blocking commands).
    wait_ms: int = 0

    @property
    def blocking(self) -> bool:
        """The server may hold the reply back (and every later command's with it)."""
        return self.wait_ms > 0

    def encode(self) -> bytes:
        """The command line (and data block) exactly as written to the socket."""
        raise NotImplementedError

    def wire_size(self) -> int:
        """How many bytes :meth:`encode` writes (pipelined bulk calls budget them)."""
        return len(self.encode())


@record
class Add(Command):
    """``add <id> <name> <ttr> <ttl> <size> [flags]`` and the payload: enqueue a job.

    ``ttr_ms``: 1..86,400,000. ``ttl_ms``: 1..2,592,000,000. ``priority``: signed 32-bit, higher
    runs first. ``max_attempts``/``max_fails``: 0 (unlimited)..255. ``job_id``: a UUIDv4,
    generated when not given (or empty).
    """

    name: str
    payload: bytes
    ttr_ms: int
    ttl_ms: int
    priority: int = 0
    max_attempts: int = 0
    max_fails: int = 0
    job_id: str = ""  # a new UUIDv4 when empty
    verb: ClassVar[str] = "add"
    has_payload: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _set(self, "job_id", validate_id(self.job_id) if self.job_id else new_id())
        _set(self, "payload", _add_fields(self.name, self.payload, self.ttr_ms, self.ttl_ms,
                                          self.priority, self.max_attempts, self.max_fails))

    def encode(self) -> bytes:
        return _encode_add(self.job_id, self.name, self.payload, self.ttr_ms, self.ttl_ms,
                           self.priority, self.max_attempts, self.max_fails)


def _add_fields(
    name: str, payload: bytes, ttr_ms: int, ttl_ms: int, priority: int, max_attempts: int,
    max_fails: int,
) -> bytes:
    """Check the fields of an add but its id, in their order; return the payload as bytes.
    The common case (a known name, a ``bytes`` payload, plain ints in range) costs a few
    comparisons.

    Raises:
        InvalidArgument: the first invalid field.
    """
    if type(name) is not str or name not in _KNOWN_NAMES:
        validate_name(name)
    if type(payload) is not bytes or len(payload) > MAX_PAYLOAD:
        payload = _data("payload", payload, "Invalid payload size")
    if not (type(ttr_ms) is int and 1 <= ttr_ms <= MAX_TTR_MS
            and type(ttl_ms) is int and 1 <= ttl_ms <= MAX_TTL_MS
            and type(priority) is int and I32_MIN <= priority <= I32_MAX
            and type(max_attempts) is int and 0 <= max_attempts <= MAX_ATTEMPTS
            and type(max_fails) is int and 0 <= max_fails <= MAX_FAILS):
        _int("ttr", ttr_ms, 1, MAX_TTR_MS, "Invalid TTR")
        _int("ttl", ttl_ms, 1, MAX_TTL_MS, "Invalid TTL")
        _int("priority", priority, I32_MIN, I32_MAX, "Invalid Priority")
        _int("max_attempts", max_attempts, 0, MAX_ATTEMPTS, "Invalid max attempts")
        _int("max_fails", max_fails, 0, MAX_FAILS, "Invalid max fails")
    return payload


def _encode_add(
    job_id: str, name: str, payload: bytes, ttr_ms: int, ttl_ms: int, priority: int,
    max_attempts: int, max_fails: int,
) -> bytes:
    flags = _flags(priority, max_attempts, max_fails) if priority or max_attempts or max_fails \
        else b""
    wire = b"add %s %s %d %d %d%s\r\n%b\r\n" % (
        job_id.encode(), name.encode(), ttr_ms, ttl_ms, len(payload), flags, payload)
    return _fit(wire, b"add")


class EncodedAdd(Command):
    """An :class:`Add` as the clients send it: checked exactly as ``Add`` checks it (the same
    :class:`InvalidArgument`), and kept only as its id and its bytes, which are the bytes
    ``Add(...).encode()`` gives. Cheaper to build than an ``Add`` (two fields, not eight) on the
    clients' hot path; read-only.
    """

    __slots__ = ("_wire", "job_id")
    job_id: str
    _wire: bytes
    verb: ClassVar[str] = "add"
    has_payload: ClassVar[bool] = True

    def __init__(
        self, name: str, payload: bytes, ttr_ms: int, ttl_ms: int, priority: int = 0,
        max_attempts: int = 0, max_fails: int = 0, job_id: str = "",
    ) -> None:
        job_id = validate_id(job_id) if job_id else new_id()
        if (type(name) is str and name in _KNOWN_NAMES  # the common case inline
                and type(payload) is bytes and len(payload) <= MAX_PAYLOAD
                and type(ttr_ms) is int and 1 <= ttr_ms <= MAX_TTR_MS
                and type(ttl_ms) is int and 1 <= ttl_ms <= MAX_TTL_MS
                and not (priority or max_attempts or max_fails)
                and type(priority) is type(max_attempts) is type(max_fails) is int):
            wire = b"add %s %s %d %d %d\r\n%b\r\n" % (
                job_id.encode(), name.encode(), ttr_ms, ttl_ms, len(payload), payload)
            if len(wire) in REFUSED_TOTALS:
                wire = _fit(wire, b"add")
        else:
            payload = _add_fields(name, payload, ttr_ms, ttl_ms, priority, max_attempts,
                                  max_fails)
            wire = _encode_add(job_id, name, payload, ttr_ms, ttl_ms, priority, max_attempts,
                               max_fails)
        _set_job_id(self, job_id)
        _set_wire(self, wire)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._wire[:120]!r})"

    def encode(self) -> bytes:
        return self._wire

    def wire_size(self) -> int:
        return len(self._wire)

    @classmethod
    def many(
        cls, name: str, payloads: Sequence[bytes], ttr_ms: int, ttl_ms: int, priority: int = 0,
        job_ids: Sequence[str] | None = None,
    ) -> list[EncodedAdd]:
        """One add per payload (with its id from ``job_ids``, or a new one), each checked as
        ``EncodedAdd(name, payload, ttr_ms, ttl_ms, priority, job_id=...)`` would check it, in
        order: the fields they share once, with the first; then each payload and id. New ids
        come from one ``os.urandom`` call for the whole batch.

        Raises:
            InvalidArgument: the first invalid field.
            LocalProtocolError: ``job_ids`` does not give one id per payload.
        """
        if job_ids is not None and len(job_ids) != len(payloads):
            raise LocalProtocolError(f"{len(job_ids)} job ids for {len(payloads)} payloads")
        if not payloads:
            return []
        ids = [""] * len(payloads) if job_ids is None else job_ids
        first = cls(name, payloads[0], ttr_ms, ttl_ms, priority, job_id=ids[0])
        fresh = iter(new_ids(len(ids) - 1 if job_ids is None
                             else sum(1 for job_id in ids[1:] if not job_id)))
        # b"add <id>" + middle + b"<size>\r\n<payload>\r\n", the middle built once.
        middle = b" %s %d %d " % (name.encode(), ttr_ms, ttl_ms)
        flags = _flags(priority)
        new = object.__new__
        out = [first]
        for payload, job_id in zip(payloads[1:], ids[1:], strict=True):
            job_id = validate_id(job_id) if job_id else next(fresh)
            if type(payload) is not bytes or len(payload) > MAX_PAYLOAD:
                payload = _data("payload", payload, "Invalid payload size")
            command = new(cls)
            _set_job_id(command, job_id)
            wire = b"add %s%s%d%s\r\n%b\r\n" % (
                job_id.encode(), middle, len(payload), flags, payload)
            _set_wire(command, _fit(wire, b"add"))
            out.append(command)
        return out



# Its two slots, set through their descriptors (cheaper than ``object.__setattr__``).
_set_job_id = EncodedAdd.__dict__["job_id"].__set__
_set_wire = EncodedAdd.__dict__["_wire"].__set__

@record
class Schedule(Command):
    """``schedule <id> <name> <ttr> <ttl> <time> <size> [flags]`` and the payload.

    ``time``: an aware datetime, sent in UTC rounded up to the second. Other fields as
    :class:`Add`; the TTL counts from ``time``.
    """

    name: str
    payload: bytes
    ttr_ms: int
    ttl_ms: int
    time: datetime
    priority: int = 0
    max_attempts: int = 0
    max_fails: int = 0
    job_id: str = ""  # a new UUIDv4 when empty
    verb: ClassVar[str] = "schedule"
    has_payload: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _set(self, "job_id", validate_id(self.job_id) if self.job_id else new_id())
        validate_name(self.name)
        _set(self, "payload", _data("payload", self.payload, "Invalid payload size"))
        _int("ttr", self.ttr_ms, 1, MAX_TTR_MS, "Invalid TTR")
        _int("ttl", self.ttl_ms, 1, MAX_TTL_MS, "Invalid TTL")
        format_time(self.time)
        _int("priority", self.priority, I32_MIN, I32_MAX, "Invalid Priority")
        _int("max_attempts", self.max_attempts, 0, MAX_ATTEMPTS, "Invalid max attempts")
        _int("max_fails", self.max_fails, 0, MAX_FAILS, "Invalid max fails")

    def encode(self) -> bytes:
        return _fit(b"schedule %s %s %d %d %s %d%s\r\n%b\r\n" % (
            self.job_id.encode(), self.name.encode(), self.ttr_ms, self.ttl_ms,
            format_time(self.time).encode(), len(self.payload),
            _flags(self.priority, self.max_attempts, self.max_fails), self.payload,
        ), b"schedule")


@record
class Run(Command):
    """``run <id> <name> <ttr> <wait-timeout> <size> [-priority=N]`` and the payload: enqueue
    a job and block until its result, ``wait_ms`` for a worker to take it, then up to its TTR."""

    name: str
    payload: bytes
    ttr_ms: int
    wait_ms: int
    priority: int = 0
    job_id: str = ""  # a new UUIDv4 when empty
    verb: ClassVar[str] = "run"
    shape: ClassVar[Shape] = Shape.RESULT
    has_payload: ClassVar[bool] = True

    @property
    def blocking(self) -> bool:
        return True  # until a worker finishes it, even with a wait-timeout of 0

    def __post_init__(self) -> None:
        _set(self, "job_id", validate_id(self.job_id) if self.job_id else new_id())
        validate_name(self.name)
        _set(self, "payload", _data("payload", self.payload, "Invalid payload size"))
        _int("ttr", self.ttr_ms, 1, MAX_TTR_MS, "Invalid TTR")
        _int("wait_timeout", self.wait_ms, 0, MAX_WAIT_MS, "Invalid wait timeout")
        _int("priority", self.priority, I32_MIN, I32_MAX, "Invalid Priority")

    def encode(self) -> bytes:
        return _fit(b"run %s %s %d %d %d%s\r\n%b\r\n" % (
            self.job_id.encode(), self.name.encode(), self.ttr_ms, self.wait_ms,
            len(self.payload), _flags(self.priority), self.payload,
        ), b"run")


@record
class Result(Command):
    """``result <id> <wait-timeout>``: a job's result, waiting up to ``wait_ms`` for it."""

    job_id: str
    wait_ms: int = 0
    verb: ClassVar[str] = "result"
    shape: ClassVar[Shape] = Shape.RESULT

    def __post_init__(self) -> None:
        _set(self, "job_id", validate_id(self.job_id))
        _int("wait_timeout", self.wait_ms, 0, MAX_WAIT_MS, "Invalid wait timeout")

    def encode(self) -> bytes:
        return b"result %s %d\r\n" % (self.job_id.encode(), self.wait_ms)


@record
class Lease(Command):
    """``lease <name>... <wait-timeout>``: take a job from any of ``names``, waiting up to
    ``wait_ms`` for one."""

    names: tuple[str, ...]
    wait_ms: int
    verb: ClassVar[str] = "lease"
    shape: ClassVar[Shape] = Shape.LEASE

    def __post_init__(self) -> None:
        names = self.names
        if isinstance(names, str):
            names = (names,)
        if not isinstance(names, (tuple, list)) or not names:
            raise InvalidArgument("lease needs at least one name", "Invalid command args")
        _set(self, "names", tuple(validate_name(n) for n in names))
        _int("wait_timeout", self.wait_ms, 0, MAX_WAIT_MS, "Invalid wait timeout")

    def encode(self) -> bytes:
        return b"lease %s %d\r\n" % (" ".join(self.names).encode(), self.wait_ms)


@record
class Complete(Command):
    """``complete <id> <size>`` and the result: the job succeeded."""

    job_id: str
    result: bytes = b""
    verb: ClassVar[str] = "complete"
    has_payload: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _set(self, "job_id", validate_id(self.job_id))
        _set(self, "result", _data("result", self.result, "Invalid result size"))

    def encode(self) -> bytes:
        return _fit(b"complete %s %d\r\n%b\r\n" % (
            self.job_id.encode(), len(self.result), self.result), b"complete")


@record
class Fail(Command):
    """``fail <id> <size>`` and the result (error text): the job failed."""

    job_id: str
    result: bytes = b""
    verb: ClassVar[str] = "fail"
    has_payload: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _set(self, "job_id", validate_id(self.job_id))
        _set(self, "result", _data("result", self.result, "Invalid result size"))

    def encode(self) -> bytes:
        return _fit(b"fail %s %d\r\n%b\r\n" % (
            self.job_id.encode(), len(self.result), self.result), b"fail")


@record
class Delete(Command):
    """``delete <id>``: remove a job (and its result)."""

    job_id: str
    verb: ClassVar[str] = "delete"

    def __post_init__(self) -> None:
        _set(self, "job_id", validate_id(self.job_id))

    def encode(self) -> bytes:
        return b"delete %s\r\n" % self.job_id.encode()


@record
class InspectJob(Command):
    """``inspect job <id>``: one job's record."""

    job_id: str
    verb: ClassVar[str] = "inspect job"
    shape: ClassVar[Shape] = Shape.JOBS

    def __post_init__(self) -> None:
        _set(self, "job_id", validate_id(self.job_id))

    def encode(self) -> bytes:
        return b"inspect job %s\r\n" % self.job_id.encode()


def _page(offset: object, limit: object) -> None:
    _int("offset", offset, 0, MAX_OFFSET, "Invalid cursor offset")
    _int("limit", limit, 1, MAX_LIMIT, "Invalid limit")


@record
class InspectJobs(Command):
    """``inspect jobs <name> <offset> <limit>``: ready jobs of a queue, highest priority first
    (``limit``: 1..100)."""

    name: str
    offset: int = 0
    limit: int = MAX_LIMIT
    verb: ClassVar[str] = "inspect jobs"
    shape: ClassVar[Shape] = Shape.JOBS

    def __post_init__(self) -> None:
        validate_name(self.name)
        _page(self.offset, self.limit)

    def encode(self) -> bytes:
        return b"inspect jobs %s %d %d\r\n" % (self.name.encode(), self.offset, self.limit)


@record
class InspectScheduledJobs(Command):
    """``inspect scheduled-jobs <name> <offset> <limit>``: jobs not yet due, soonest first."""

    name: str
    offset: int = 0
    limit: int = MAX_LIMIT
    verb: ClassVar[str] = "inspect scheduled-jobs"
    shape: ClassVar[Shape] = Shape.JOBS

    def __post_init__(self) -> None:
        validate_name(self.name)
        _page(self.offset, self.limit)

    def encode(self) -> bytes:
        return b"inspect scheduled-jobs %s %d %d\r\n" % (
            self.name.encode(), self.offset, self.limit)


@record
class InspectQueue(Command):
    """``inspect queue <name>``: one queue's lengths."""

    name: str
    verb: ClassVar[str] = "inspect queue"
    shape: ClassVar[Shape] = Shape.QUEUES

    def __post_init__(self) -> None:
        validate_name(self.name)

    def encode(self) -> bytes:
        return b"inspect queue %s\r\n" % self.name.encode()


@record
class InspectQueues(Command):
    """``inspect queues <offset> <limit>``: queues in alphabetical order."""

    offset: int = 0
    limit: int = MAX_LIMIT
    verb: ClassVar[str] = "inspect queues"
    shape: ClassVar[Shape] = Shape.QUEUES

    def __post_init__(self) -> None:
        _page(self.offset, self.limit)

    def encode(self) -> bytes:
        return b"inspect queues %d %d\r\n" % (self.offset, self.limit)


@record
class InspectServer(Command):
    """``inspect server``: active clients, evicted jobs, start time."""

    verb: ClassVar[str] = "inspect server"
    shape: ClassVar[Shape] = Shape.SERVER

    def encode(self) -> bytes:
        return b"inspect server\r\n"
