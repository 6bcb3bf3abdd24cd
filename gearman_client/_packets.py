"""Gearman binary packets: one frozen record per packet type (1-42), and their framing.

A packet on the wire is a 12-byte header (4-byte magic ``\\0REQ`` or ``\\0RES``, 4-byte big-endian
type, 4-byte big-endian body size) followed by the body: the arguments joined by NUL bytes, the
last one opaque (it may contain NULs; its end is the end of the body).

Why it is shaped like this:

* Each packet class lists its arguments as record fields in wire order, typed ``bytes``,
  ``int`` or ``bool``. Encoding and decoding are generic (:func:`encode_packet`,
  :class:`PacketDecoder`), so the 42 layouts are declared once and cannot drift between the
  client, worker and server roles, which all use the same classes.
* Validation happens on the send path (:meth:`Packet.validate`: function names non-empty without
  whitespace or control bytes, unique ids at most 63 bytes without control bytes, handles at
  most 64 bytes); the parse path only
  checks framing, so a server's odd but well-framed value is still delivered.
* The decoder sits on :class:`jobwire._buffer.ReceiveBuffer` (a ``bytearray``): a 64 MiB body
  arriving in 256 KiB reads costs one append per read, never a ``bytes +=`` copy of everything so
  far. A body larger than ``max_body_size`` is refused from the header alone, before it is
  buffered. Bad magic and unknown types raise :class:`~jobwire.errors.RemoteProtocolError`.
"""

from __future__ import annotations

import enum
import re
import struct
from collections.abc import Callable

from jobwire._buffer import ReceiveBuffer
from jobwire._numbers import parse_int
from jobwire._record import fields as record_fields
from jobwire._record import record
from jobwire.errors import LocalProtocolError, RemoteProtocolError

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import ClassVar, TypeAlias, TypeVar
else:
    from jobwire._typing import TypeVar

__all__ = [
    "DEFAULT_MAX_BODY_SIZE",
    "HEADER_SIZE",
    "MAX_HANDLE",
    "MAX_UNIQUE",
    "PACKETS",
    "REQ",
    "RES",
    "Packet",
    "PacketDecoder",
    "PacketType",
    "Priority",
    "encode_packet",
    "submit_packet",
]

REQ = b"\0REQ"
RES = b"\0RES"
HEADER_SIZE = 12
#: Largest body accepted from a peer by default.
DEFAULT_MAX_BODY_SIZE = 64 * 1024 * 1024
#: gearmand keeps 64 bytes for a unique id including its NUL (docs/gearman.md: 64 is cut).
MAX_UNIQUE = 63
#: Job handles are at most 64 bytes.
MAX_HANDLE = 64
_MAX_WIRE_BODY = (1 << 32) - 1
#: Bodies up to this size are taken from the buffer with their header (one call, one more
#: copy); larger ones without it (no second copy of a big body).
_SMALL_BODY = 4096
_HEADER = struct.Struct(">4sII")


class PacketType(enum.IntEnum):
    """Every packet type number gearmand 1.1.20 knows (1-36 from the protocol document, 37-42
    from gearmand; 5 is reserved and answered with ERROR)."""

    CAN_DO = 1
    CANT_DO = 2
    RESET_ABILITIES = 3
    PRE_SLEEP = 4
    UNUSED = 5
    NOOP = 6
    SUBMIT_JOB = 7
    JOB_CREATED = 8
    GRAB_JOB = 9
    NO_JOB = 10
    JOB_ASSIGN = 11
    WORK_STATUS = 12
    WORK_COMPLETE = 13
    WORK_FAIL = 14
    GET_STATUS = 15
    ECHO_REQ = 16
    ECHO_RES = 17
    SUBMIT_JOB_BG = 18
    ERROR = 19
    STATUS_RES = 20
    SUBMIT_JOB_HIGH = 21
    SET_CLIENT_ID = 22
    CAN_DO_TIMEOUT = 23
    ALL_YOURS = 24
    WORK_EXCEPTION = 25
    OPTION_REQ = 26
    OPTION_RES = 27
    WORK_DATA = 28
    WORK_WARNING = 29
    GRAB_JOB_UNIQ = 30
    JOB_ASSIGN_UNIQ = 31
    SUBMIT_JOB_HIGH_BG = 32
    SUBMIT_JOB_LOW = 33
    SUBMIT_JOB_LOW_BG = 34
    SUBMIT_JOB_SCHED = 35
    SUBMIT_JOB_EPOCH = 36
    SUBMIT_REDUCE_JOB = 37
    SUBMIT_REDUCE_JOB_BACKGROUND = 38
    GRAB_JOB_ALL = 39
    JOB_ASSIGN_ALL = 40
    GET_STATUS_UNIQUE = 41
    STATUS_RES_UNIQUE = 42


class Priority(enum.Enum):
    """The three queue levels of a job."""

    #: Runs before NORMAL and LOW jobs of the same function.
    HIGH = "high"
    #: The default.
    NORMAL = "normal"
    #: Runs after HIGH and NORMAL jobs.
    LOW = "low"


# -- argument codecs ----------------------------------------------------------------------------


def _dec_bytes(raw: bytes) -> bytes:
    return raw


def _dec_int(raw: bytes) -> int:
    return parse_int(raw, "an integer argument")


#: A STATUS_RES / STATUS_RES_UNIQUE numerator or denominator: an int, read as 0 when empty.
#: OpenStack gear's server sends both empty for a job that never sent WORK_STATUS (gearmand
#: sends ``0``); anything else that is not a number is still refused.
Progress: TypeAlias = int


def _dec_progress(raw: bytes) -> int:
    return 0 if raw == b"" else _dec_int(raw)


def _dec_bool(raw: bytes) -> bool:
    if raw == b"1":
        return True
    if raw == b"0":
        return False
    raise RemoteProtocolError(f"expected 0 or 1, got {raw[:40]!r}")


def _enc_bytes(value: bytes) -> bytes:
    return value


def _enc_int(value: int) -> bytes:
    return b"%d" % value


def _enc_bool(value: bool) -> bytes:
    return b"1" if value else b"0"


_CODECS: dict[str, tuple[Callable[[bytes], object], Callable[..., bytes]]] = {
    "bytes": (_dec_bytes, _enc_bytes),
    "int": (_dec_int, _enc_int),
    "Progress": (_dec_progress, _enc_int),
    "bool": (_dec_bool, _enc_bool),
}


#: Bytes a function name may not hold: whitespace and controls (NUL ends it on the wire; TAB
#: and LF would forge lines of gearmand's ``status``, and a name holding ``\n.\n`` would end
#: that list early; a space makes ``workers`` list two functions).
_NOT_IN_NAME = re.compile(rb"[\x00-\x20\x7f]")
#: Bytes a unique id may not hold: controls (``show unique jobs`` lists one per line).
_NOT_IN_UNIQUE = re.compile(rb"[\x00-\x1f\x7f]")


def check_name(value: bytes, what: str) -> None:
    """Check a function name: non-empty, no whitespace or control bytes (gearmand lists names
    verbatim in ``status``, ``prioritystatus`` and ``workers``: a tab or newline in one would
    forge rows there). ``what`` names the value in the error.

    Raises:
        LocalProtocolError: not ``bytes``, empty, or holding whitespace or a control byte.
    """
    if not isinstance(value, bytes):
        raise LocalProtocolError(f"{what} must be bytes, got {type(value).__name__}")
    if not value:
        raise LocalProtocolError(f"{what} must not be empty")
    if _NOT_IN_NAME.search(value):
        raise LocalProtocolError(
            f"{what} must not contain whitespace or control bytes: {value[:40]!r}"
        )


def check_unique(value: bytes) -> None:
    """Check a unique id: at most 63 bytes, no control bytes (NUL, TAB, CR, LF ...: gearmand
    lists uniques verbatim, one per line, in ``show unique jobs``); empty means "no unique":
    never coalesced.

    Raises:
        LocalProtocolError: not ``bytes``, longer than 63 bytes, or holding a control byte.
    """
    if not isinstance(value, bytes):
        raise LocalProtocolError(f"unique must be bytes, got {type(value).__name__}")
    if len(value) > MAX_UNIQUE:
        raise LocalProtocolError(f"unique is {len(value)} bytes, at most {MAX_UNIQUE} allowed")
    if _NOT_IN_UNIQUE.search(value):
        raise LocalProtocolError(f"unique must not contain control bytes: {value[:40]!r}")


def check_handle(value: bytes) -> None:
    """A job handle: 1-64 bytes, no NUL."""
    if not isinstance(value, bytes):
        raise LocalProtocolError(f"handle must be bytes, got {type(value).__name__}")
    if not value or len(value) > MAX_HANDLE:
        raise LocalProtocolError(f"handle must be 1-{MAX_HANDLE} bytes, got {len(value)}")
    if b"\0" in value:
        raise LocalProtocolError(f"handle must not contain NUL: {value[:40]!r}")


def check_client_id(value: bytes) -> None:
    """A worker id: 1-255 bytes, no NUL, whitespace or control bytes (the ``workers`` admin
    listing prints it verbatim: a newline in it would forge lines there)."""
    if not value or len(value) > 255:
        raise LocalProtocolError(f"client id must be 1-255 bytes, got {len(value)}")
    if any(b <= 32 or b == 127 for b in value):
        raise LocalProtocolError(f"client id must not contain whitespace or controls: {value!r}")


def _check_field(cls_name: str, name: str, kind: str, value: object, last: bool) -> None:
    if kind == "bytes":
        if not isinstance(value, bytes):
            raise LocalProtocolError(f"{cls_name}.{name} must be bytes, got {type(value).__name__}")
        if not last and b"\0" in value:
            raise LocalProtocolError(f"{cls_name}.{name} must not contain NUL: {value[:40]!r}")
        if name == "function" or name == "reducer":
            check_name(value, name)
        elif name == "unique":
            check_unique(value)
        elif name == "handle":
            check_handle(value)
        elif name == "client_id":
            check_client_id(value)
    elif kind == "int" or kind == "Progress":
        if not isinstance(value, int) or isinstance(value, bool):
            raise LocalProtocolError(f"{cls_name}.{name} must be an int, got {value!r}")
        if value < 0 or value >= 1 << 64:
            raise LocalProtocolError(f"{cls_name}.{name} must be 0 <= n < 2**64, got {value}")
    elif not isinstance(value, bool):
        raise LocalProtocolError(f"{cls_name}.{name} must be a bool, got {value!r}")


# -- the packet classes -------------------------------------------------------------------------


class Packet:
    """Base class of every packet. ``TYPE`` is its type number; the fields are its arguments in
    wire order (the last one is opaque)."""

    __slots__ = ()
    TYPE: ClassVar[PacketType]
    #: The first 8 bytes of the header by magic: ``REQ`` or ``RES``, then the type number.
    _PREFIX: ClassVar[dict[bytes, bytes]] = {}
    #: The number of arguments, and whether every one of them is bytes (decoded as is).
    _NARGS: ClassVar[int] = 0
    _RAW: ClassVar[bool] = True
    _FIELDS: ClassVar[tuple[str, ...]] = ()
    _DECODERS: ClassVar[tuple[Callable[[bytes], object], ...]] = ()
    _ENCODERS: ClassVar[tuple[Callable[..., bytes], ...]] = ()
    _KINDS: ClassVar[tuple[str, ...]] = ()

    def args(self) -> list[bytes]:
        """The arguments as they go on the wire."""
        pairs = zip(self._FIELDS, self._ENCODERS, strict=True)
        return [enc(getattr(self, name)) for name, enc in pairs]

    def validate(self) -> None:
        """Check every argument before sending.

        Raises:
            LocalProtocolError: a name is empty or has whitespace or a control byte, a unique
                id is over 63 bytes or has a control byte, a handle is over 64 bytes, a number
                is negative, or a non-final argument contains NUL.
        """
        n = len(self._FIELDS)
        for i, (name, kind) in enumerate(zip(self._FIELDS, self._KINDS, strict=True)):
            _check_field(type(self).__name__, name, kind, getattr(self, name), i == n - 1)

    @classmethod
    def from_args(cls: type[P], args: list[bytes]) -> P:
        """Build the packet from its decoded arguments (no validation beyond types)."""
        return cls(*[dec(a) for dec, a in zip(cls._DECODERS, args, strict=True)])


P = TypeVar("P", bound=Packet)

#: Every packet class by type number.
PACKETS: dict[int, type[Packet]] = {}


def _packet(ptype: PacketType) -> Callable[[type[P]], type[P]]:
    def register(cls: type[P]) -> type[P]:
        fields = record_fields(cls)
        kinds = tuple(str(f.type) for f in fields)
        for kind in kinds:
            assert kind in _CODECS, (cls, kind)
        cls.TYPE = ptype
        cls._PREFIX = {magic: magic + int(ptype).to_bytes(4, "big") for magic in (REQ, RES)}
        cls._NARGS = len(fields)
        cls._RAW = all(kind == "bytes" for kind in kinds)
        cls._FIELDS = tuple(f.name for f in fields)
        cls._KINDS = kinds
        cls._DECODERS = tuple(_CODECS[k][0] for k in kinds)
        cls._ENCODERS = tuple(_CODECS[k][1] for k in kinds)
        PACKETS[int(ptype)] = cls
        return cls

    return register


@_packet(PacketType.CAN_DO)
@record
class CanDo(Packet):
    """Worker: I can run ``function``."""

    function: bytes


@_packet(PacketType.CANT_DO)
@record
class CantDo(Packet):
    """Worker: I no longer run ``function``."""

    function: bytes


@_packet(PacketType.RESET_ABILITIES)
@record
class ResetAbilities(Packet):
    """Worker: forget every function I registered."""


@_packet(PacketType.PRE_SLEEP)
@record
class PreSleep(Packet):
    """Worker: I am going to sleep; wake me with NOOP when a job comes."""


@_packet(PacketType.UNUSED)
@record
class Unused(Packet):
    """Type 5, reserved: gearmand answers ERROR INVALID_COMMAND."""


@_packet(PacketType.NOOP)
@record
class Noop(Packet):
    """Server to a sleeping worker: a job may be waiting, grab it."""


@record
class Submit(Packet):
    """Base of the six plain submit packets (foreground/background x high/normal/low)."""

    function: bytes
    unique: bytes
    data: bytes

    #: Whether the client is detached from the job (no WORK_* packets, no result).
    BACKGROUND: ClassVar[bool] = False
    PRIORITY: ClassVar[Priority] = Priority.NORMAL

    # Fast paths for the packet bulk submits are made of; anything odd takes the generic path,
    # which raises the precise error.
    def args(self) -> list[bytes]:
        return [self.function, self.unique, self.data]

    def validate(self) -> None:
        f, u = self.function, self.unique
        if (
            type(f) is bytes and f and _NOT_IN_NAME.search(f) is None and type(u) is bytes
            and len(u) <= MAX_UNIQUE and (not u or _NOT_IN_UNIQUE.search(u) is None)
            and type(self.data) is bytes
        ):
            return
        Packet.validate(self)


@_packet(PacketType.SUBMIT_JOB)
@record
class SubmitJob(Submit):
    """Client: run a job and send me its updates and result."""


@_packet(PacketType.SUBMIT_JOB_BG)
@record
class SubmitJobBg(Submit):
    """Client: queue a background job."""

    BACKGROUND: ClassVar[bool] = True


@_packet(PacketType.SUBMIT_JOB_HIGH)
@record
class SubmitJobHigh(Submit):
    """Client: a high-priority foreground job."""

    PRIORITY: ClassVar[Priority] = Priority.HIGH


@_packet(PacketType.SUBMIT_JOB_HIGH_BG)
@record
class SubmitJobHighBg(Submit):
    """Client: a high-priority background job."""

    BACKGROUND: ClassVar[bool] = True
    PRIORITY: ClassVar[Priority] = Priority.HIGH


@_packet(PacketType.SUBMIT_JOB_LOW)
@record
class SubmitJobLow(Submit):
    """Client: a low-priority foreground job."""

    PRIORITY: ClassVar[Priority] = Priority.LOW


@_packet(PacketType.SUBMIT_JOB_LOW_BG)
@record
class SubmitJobLowBg(Submit):
    """Client: a low-priority background job."""

    BACKGROUND: ClassVar[bool] = True
    PRIORITY: ClassVar[Priority] = Priority.LOW


@_packet(PacketType.JOB_CREATED)
@record
class JobCreated(Packet):
    """Server: the submitted job has this handle (an existing one when coalesced)."""

    handle: bytes


@_packet(PacketType.GRAB_JOB)
@record
class GrabJob(Packet):
    """Worker: give me a job (answered JOB_ASSIGN or NO_JOB)."""


@_packet(PacketType.NO_JOB)
@record
class NoJob(Packet):
    """Server: nothing to grab."""


@_packet(PacketType.JOB_ASSIGN)
@record
class JobAssign(Packet):
    """Server: run this job (answer to GRAB_JOB)."""

    handle: bytes
    function: bytes
    data: bytes


@_packet(PacketType.WORK_STATUS)
@record
class WorkStatus(Packet):
    """Worker to server, server to clients: ``numerator``/``denominator`` done."""

    handle: bytes
    numerator: int
    denominator: int


@_packet(PacketType.WORK_COMPLETE)
@record
class WorkComplete(Packet):
    """Worker to server, server to clients: the job succeeded with ``data``."""

    handle: bytes
    data: bytes


@_packet(PacketType.WORK_FAIL)
@record
class WorkFail(Packet):
    """Worker to server, server to clients: the job failed."""

    handle: bytes


@_packet(PacketType.GET_STATUS)
@record
class GetStatus(Packet):
    """Client: how is the job with this handle doing? (answered STATUS_RES)"""

    handle: bytes


@_packet(PacketType.ECHO_REQ)
@record
class EchoReq(Packet):
    """Send ``data`` back to me (ECHO_RES)."""

    data: bytes


@_packet(PacketType.ECHO_RES)
@record
class EchoRes(Packet):
    """Server: the data of an ECHO_REQ."""

    data: bytes


@_packet(PacketType.ERROR)
@record
class Error(Packet):
    """Server: ``code`` (e.g. ``QUEUE_ERROR``) and a text."""

    code: bytes
    text: bytes


@_packet(PacketType.STATUS_RES)
@record
class StatusRes(Packet):
    """Server: the status of a handle (``known`` is False for a job the server does not hold)."""

    handle: bytes
    known: bool
    running: bool
    numerator: Progress
    denominator: Progress


@_packet(PacketType.SET_CLIENT_ID)
@record
class SetClientId(Packet):
    """Worker: my id, as shown by the ``workers`` admin command."""

    client_id: bytes


@_packet(PacketType.CAN_DO_TIMEOUT)
@record
class CanDoTimeout(Packet):
    """Worker: I can run ``function``; a job of it may run ``timeout`` milliseconds (gearmand
    1.1.20 enforces at least 1000) before the server requeues it silently."""

    function: bytes
    timeout: int


@_packet(PacketType.ALL_YOURS)
@record
class AllYours(Packet):
    """Never implemented by gearmand (ERROR INVALID_COMMAND)."""


@_packet(PacketType.WORK_EXCEPTION)
@record
class WorkException(Packet):
    """Worker to server, server to clients that asked for ``exceptions``: failed with ``data``."""

    handle: bytes
    data: bytes


@_packet(PacketType.OPTION_REQ)
@record
class OptionReq(Packet):
    """Set a connection option (only ``exceptions`` exists)."""

    name: bytes


@_packet(PacketType.OPTION_RES)
@record
class OptionRes(Packet):
    """Server: the option was set."""

    name: bytes


@_packet(PacketType.WORK_DATA)
@record
class WorkData(Packet):
    """Worker to server, server to clients: partial data of a running job."""

    handle: bytes
    data: bytes


@_packet(PacketType.WORK_WARNING)
@record
class WorkWarning(Packet):
    """Worker to server, server to clients: a warning from a running job."""

    handle: bytes
    data: bytes


@_packet(PacketType.GRAB_JOB_UNIQ)
@record
class GrabJobUniq(Packet):
    """Worker: give me a job with its unique id (JOB_ASSIGN_UNIQ or NO_JOB)."""


@_packet(PacketType.JOB_ASSIGN_UNIQ)
@record
class JobAssignUniq(Packet):
    """Server: run this job (answer to GRAB_JOB_UNIQ / GRAB_JOB_ALL)."""

    handle: bytes
    function: bytes
    unique: bytes
    data: bytes


@_packet(PacketType.SUBMIT_JOB_SCHED)
@record
class SubmitJobSched(Packet):
    """Cron-like background job. gearmand 1.1.20 answers ERROR INVALID_COMMAND: use EPOCH."""

    function: bytes
    unique: bytes
    minute: int
    hour: int
    day_of_month: int
    month: int
    day_of_week: int
    data: bytes


@_packet(PacketType.SUBMIT_JOB_EPOCH)
@record
class SubmitJobEpoch(Packet):
    """Client: a background job to run at unix time ``epoch``."""

    function: bytes
    unique: bytes
    epoch: int
    data: bytes

    BACKGROUND: ClassVar[bool] = True


@_packet(PacketType.SUBMIT_REDUCE_JOB)
@record
class SubmitReduceJob(Packet):
    """Client: a map/reduce job (``aggregator`` is unused by gearmand but must be present)."""

    function: bytes
    unique: bytes
    reducer: bytes
    aggregator: bytes
    data: bytes

    BACKGROUND: ClassVar[bool] = False


@_packet(PacketType.SUBMIT_REDUCE_JOB_BACKGROUND)
@record
class SubmitReduceJobBackground(Packet):
    """Client: a background map/reduce job."""

    function: bytes
    unique: bytes
    reducer: bytes
    aggregator: bytes
    data: bytes

    BACKGROUND: ClassVar[bool] = True


@_packet(PacketType.GRAB_JOB_ALL)
@record
class GrabJobAll(Packet):
    """Worker: give me a job, with its reducer if it has one (JOB_ASSIGN_ALL / _UNIQ / NO_JOB)."""


@_packet(PacketType.JOB_ASSIGN_ALL)
@record
class JobAssignAll(Packet):
    """Server: run this reduce job."""

    handle: bytes
    function: bytes
    unique: bytes
    reducer: bytes
    data: bytes


@_packet(PacketType.GET_STATUS_UNIQUE)
@record
class GetStatusUnique(Packet):
    """Client: the status of the job with this unique id (STATUS_RES_UNIQUE)."""

    unique: bytes


@_packet(PacketType.STATUS_RES_UNIQUE)
@record
class StatusResUnique(Packet):
    """Server: status by unique id, with the number of clients waiting for the job."""

    unique: bytes
    known: bool
    running: bool
    numerator: Progress
    denominator: Progress
    client_count: int


#: Packets that create a job (all answered JOB_CREATED or ERROR).
SUBMITS: tuple[type[Packet], ...] = (
    SubmitJob, SubmitJobBg, SubmitJobHigh, SubmitJobHighBg, SubmitJobLow, SubmitJobLowBg,
    SubmitJobSched, SubmitJobEpoch, SubmitReduceJob, SubmitReduceJobBackground,
)

_SUBMIT_CLASSES: dict[tuple[Priority, bool], type[Submit]] = {
    (Priority.NORMAL, False): SubmitJob,
    (Priority.NORMAL, True): SubmitJobBg,
    (Priority.HIGH, False): SubmitJobHigh,
    (Priority.HIGH, True): SubmitJobHighBg,
    (Priority.LOW, False): SubmitJobLow,
    (Priority.LOW, True): SubmitJobLowBg,
}


def submit_packet(
    function: bytes, data: bytes, *, unique: bytes = b"", priority: Priority = Priority.NORMAL,
    background: bool = False,
) -> Submit:
    """The plain SUBMIT_JOB* packet for ``priority`` and ``background``.

    Raises:
        LocalProtocolError: ``priority`` is not a :class:`Priority`.
    """
    if priority is Priority.NORMAL and background is False:
        return SubmitJob(function, unique, data)
    if not isinstance(priority, Priority):
        raise LocalProtocolError(f"priority must be a Priority, got {priority!r}")
    return _SUBMIT_CLASSES[priority, bool(background)](function, unique, data)


# -- framing --------------------------------------------------------------------------------------


def encode_packet(packet: Packet, magic: bytes) -> bytes:
    """The packet's bytes with ``magic`` (:data:`REQ` or :data:`RES`); no validation here."""
    body = b"\0".join(packet.args())
    size = len(body)
    if size > _MAX_WIRE_BODY:
        raise LocalProtocolError(f"packet body of {size} bytes does not fit in 32 bits")
    prefix = packet._PREFIX.get(magic)
    if prefix is None:  # a magic of the caller's own (tests write bad ones)
        return _HEADER.pack(magic, packet.TYPE, size) + body
    return prefix + size.to_bytes(4, "big") + body


def decode_body(ptype: int, body: bytes) -> Packet:
    """Split ``body`` into the arguments of packet type ``ptype``.

    Raises:
        RemoteProtocolError: unknown type, or the wrong number of arguments.
    """
    cls = PACKETS.get(ptype)
    if cls is None:
        raise RemoteProtocolError(f"unknown packet type {ptype}")
    return _decode(cls, body)


def _decode(cls: type[Packet], body: bytes) -> Packet:
    """:func:`decode_body` once the type is known to be ``cls``."""
    n = cls._NARGS
    if cls is WorkFail and body.endswith(b"\0"):
        body = body[:-1]  # gearmand 1.1.20 adds a NUL to a WORK_FAIL converted from an exception
    if n < 2:
        if n == 1:
            return cls(body) if cls._RAW else cls.from_args([body])  # type: ignore[call-arg]
        if body:
            raise RemoteProtocolError(f"{cls.TYPE.name} takes no arguments, got {len(body)} bytes")
        return cls()
    args = body.split(b"\0", n - 1)
    if len(args) != n:
        raise RemoteProtocolError(
            f"{cls.TYPE.name} needs {n} arguments, got {len(args)}: {body[:60]!r}"
        )
    return cls(*args) if cls._RAW else cls.from_args(args)


#: The header start of gear's WORK_FAIL with ``\0REQ`` magic (see ``PacketDecoder``).
_GEAR_WORK_FAIL = REQ + int(PacketType.WORK_FAIL).to_bytes(4, "big")


class PacketDecoder:
    """Bytes in, packets out, for one direction of one connection.

    Args:
        magic: the magic every packet must carry (:data:`RES` on the client side, :data:`REQ`
            on the server side).
        max_body_size: largest body accepted; a larger one is refused from its header.
        buffer: the buffer to read from (a core's own, which it feeds); a new one if omitted
            (then :meth:`feed` fills it).

    It keeps no state between calls: a packet is self-describing, so its 12-byte header is read
    again on each call until the whole packet is buffered.
    """

    __slots__ = ("_buf", "magic", "max_body_size")

    def __init__(
        self, magic: bytes, max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        buffer: ReceiveBuffer | None = None,
    ) -> None:
        self._buf = ReceiveBuffer() if buffer is None else buffer
        self.magic = magic
        self.max_body_size = max_body_size

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as packets."""
        return len(self._buf)

    @property
    def buffer(self) -> ReceiveBuffer:
        """The underlying buffer (the server role also reads admin text lines from it)."""
        return self._buf

    def feed(self, data: bytes) -> None:
        self._buf.feed(data)

    def next_header(self) -> tuple[bytes, int, int] | None:
        """The next header ``(magic, type, size)`` without consuming it, once the whole packet is
        buffered; ``None`` until then.

        Raises:
            RemoteProtocolError: the body is larger than ``max_body_size``.
        """
        buf = self._buf
        if len(buf) < HEADER_SIZE:
            return None
        header = buf.peek(HEADER_SIZE)
        assert header is not None
        magic, ptype, size = _HEADER.unpack(header)
        if size > self.max_body_size:
            raise RemoteProtocolError(
                f"packet type {ptype} announces a {size}-byte body, over the "
                f"{self.max_body_size}-byte limit"
            )
        if len(buf) < HEADER_SIZE + size:
            return None
        return magic, ptype, size

    def take_body(self, size: int) -> bytes:
        """Consume the header just returned by :meth:`next_header` and return the body."""
        self._buf.discard(HEADER_SIZE)
        body = self._buf.extract_exactly(size)
        assert body is not None
        return body

    def _gear_work_fail(self, head: bytes) -> bool:
        """Whether ``head`` (4 to 8 bytes) starts the one packet a server may send with request
        magic: the WORK_FAIL that OpenStack gear's server sends a client when the worker of its
        job disconnects (docs/gearman.md, "Peers")."""
        return self.magic == RES and _GEAR_WORK_FAIL.startswith(head)

    def next_packet(self) -> Packet | None:
        """The next complete packet, or ``None`` if more bytes are needed.

        Raises:
            RemoteProtocolError: bad magic, unknown type, oversized or malformed body.
        """
        buf = self._buf
        header = self._header()
        if header is None:
            return None
        cls, size = header
        if size <= _SMALL_BODY:  # header and body in one take, then the body copied out
            packet = buf.extract_exactly(HEADER_SIZE + size)
            if packet is None:
                return None
            return _decode(cls, packet[HEADER_SIZE:])
        if len(buf) < HEADER_SIZE + size:
            return None
        return _decode(cls, self.take_body(size))

    def _header(self) -> tuple[type[Packet], int] | None:
        """The next packet's class and body size, once its header is in (nothing consumed).

        Raises:
            RemoteProtocolError: bad magic, unknown type or oversized body.
        """
        header = self._buf.peek(HEADER_SIZE)
        if header is None:
            self._check_start()
            return None
        magic, ptype, size = _HEADER.unpack(header)
        cls = PACKETS.get(ptype)
        if cls is None or magic != self.magic or size > self.max_body_size:
            cls = self._check_header(magic, ptype, size)
        return cls, size

    def peek_packet(self) -> Packet | None:
        """:meth:`next_packet` without consuming the packet: the next call returns it again.

        Raises:
            RemoteProtocolError: as :meth:`next_packet` (nothing is consumed).
        """
        header = self._header()
        if header is None:
            return None
        cls, size = header
        whole = self._buf.peek(HEADER_SIZE + size)
        return None if whole is None else _decode(cls, whole[HEADER_SIZE:])

    def _check_start(self) -> None:
        """Refuse an incomplete header whose magic or type is already wrong, so garbage is
        refused without waiting for more."""
        buf = self._buf
        buffered = len(buf)
        if buffered >= 4:
            head = buf.peek(min(buffered, 8))
            assert head is not None
            if head[:4] != self.magic and not self._gear_work_fail(head):
                raise RemoteProtocolError(f"bad magic {head[:4]!r}, expected {self.magic!r}")
            if buffered >= 8 and int.from_bytes(head[4:8], "big") not in PACKETS:
                raise RemoteProtocolError(f"unknown packet type {head[4:8]!r}")

    def _check_header(self, magic: bytes, ptype: int, size: int) -> type[Packet]:
        """The class of a header the fast check found something odd in: gear's WORK_FAIL
        with request magic, or an error.

        Raises:
            RemoteProtocolError: bad magic, unknown type, or a body over ``max_body_size``.
        """
        if magic != self.magic and not self._gear_work_fail(magic + ptype.to_bytes(4, "big")):
            raise RemoteProtocolError(f"bad magic {magic!r}, expected {self.magic!r}")
        cls = PACKETS.get(ptype)
        if cls is None:
            raise RemoteProtocolError(f"unknown packet type {ptype}")
        if size > self.max_body_size:
            raise RemoteProtocolError(
                f"packet type {ptype} announces a {size}-byte body, over the "
                f"{self.max_body_size}-byte limit"
            )
        return cls
