"""The client side of the Redis wire format (RESP2, and RESP3 replies) as a Sans-IO core.

    conn = Connection()
    sock.sendall(conn.send(["SET", "k", b"v"]) + conn.send(["GET", "k"]))   # commands in
    conn.receive_data(sock.recv(65536))                                      # bytes in ...
    conn.next_event()   # Reply(value='OK')                                  # ... events out
    conn.next_event()   # Reply(value=b'v')

Why it is shaped like this:

* A command is a sequence of ``str`` (UTF-8), ``bytes``, ``int`` or ``float`` arguments, sent as
  one RESP array of bulk strings. Anything else (``bool``, ``None``, a list) is refused before
  a byte is produced. Commands that stop the server answering in order (SUBSCRIBE and friends,
  MONITOR, CLIENT REPLY, RESET, SYNC) are refused too: they would put the FIFO out of step.
* Redis answers one connection's commands strictly in order, so the core keeps a count of
  commands awaiting replies (``InOrderClientCore``): any number may be pipelined, and a reply
  with no command awaiting it is a protocol error. Pushes (RESP3 ``>``, unsolicited) answer no
  command: they come out as :class:`Push` events, never as replies. Attributes (RESP3 ``|``)
  before a reply come out as an :class:`Attribute` event; inside an aggregate they are read
  and dropped, as the RESP3 spec allows.
* Replies are typed: bulk string -> ``bytes``, simple string -> ``str``, integer and big number
  -> ``int``, null (``$-1``, ``*-1``, ``_``) -> ``None``, array -> ``list``, map -> ``dict``,
  set -> ``set``, double -> ``float``, boolean -> ``bool``, verbatim string -> :class:`Verbatim`
  (a ``bytes`` with its ``format``), error (``-`` or RESP3 ``!``) -> :class:`ErrorReply`. An
  error is an answer: the connection stays usable. (A map key or set member that is itself an
  aggregate is made hashable: list -> tuple, set -> frozenset, map -> tuple of pairs.)
* Parsing is linear in the input, whatever the chunking: jobwire's ``ReceiveBuffer`` never
  rescans a partial line and never moves consumed bytes on every read, a bulk string is waited
  for by its announced length, and nested aggregates are parsed with an explicit stack (no
  recursion) that survives between reads, so a half-received array is never parsed again.
  The parser is in one of two steps (a line; a bulk string's body); in the first, a table
  from the type byte to a reader parses the line.
* Framing is strict, with caps so a hostile server cannot exhaust memory: lines end in CRLF
  only and may not hold a lone CR or LF; lengths and integers are plain ASCII digits; a bulk
  string must be followed by CRLF; a bulk string announced over ``max_bulk`` bytes, an
  aggregate announced over ``max_array`` elements or nested deeper than ``max_depth`` is
  refused at its header, before its body is waited for, and a line is refused once
  ``max_line`` bytes of it have arrived without its CRLF. One reply as a whole (a top-level
  value with everything nested in it) may hold at most ``max_reply_items`` values and
  ``max_reply_bytes`` bytes on the wire: the per-aggregate caps alone would let nesting
  multiply a reply (8 MB of empty sets ``~0`` is two million Python sets, 449 MB), so an
  aggregate or bulk string that would pass either total is refused at its header. Any
  violation raises
  ``RemoteProtocolError`` and poisons the connection (every later call raises it again).
  Streamed RESP3 types (``$?``, ``*?``) are not sent by Redis and are refused.
* EOF is ``receive_data(b"")``; ``next_event()`` then returns :class:`ConnectionClosed` saying
  how many commands were left unanswered and whether a reply was cut short.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from jobwire._buffer import LineTooLong, MissingTerminator
from jobwire._core import ConnectionState, InOrderClientCore
from jobwire._events import NEED_DATA, NeedData
from jobwire._record import record
from jobwire.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "DEFAULT_MAX_ARRAY",
    "DEFAULT_MAX_BULK",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_LINE",
    "DEFAULT_MAX_REPLY_BYTES",
    "DEFAULT_MAX_REPLY_ITEMS",
    "NEED_DATA",
    "Arg",
    "Attribute",
    "Connection",
    "ConnectionClosed",
    "ConnectionState",
    "ErrorReply",
    "Event",
    "NeedData",
    "Push",
    "Reply",
    "Verbatim",
    "command_name",
    "encode_command",
    "encode_evalsha",
]

#: Largest bulk string accepted: Redis's own largest value (``proto-max-bulk-len``).
DEFAULT_MAX_BULK = 512 * 1024 * 1024
#: Longest line accepted (simple strings, errors, numbers, headers), CRLF included.
DEFAULT_MAX_LINE = 64 * 1024
#: Deepest nesting of aggregates accepted (Redis's own replies nest fewer than 10 deep).
DEFAULT_MAX_DEPTH = 64
#: Most elements (map: pairs) one aggregate may announce.
DEFAULT_MAX_ARRAY = 1 << 24
#: Most values one reply may hold, counted at every level of nesting (a map's keys and values
#: each count). An empty aggregate costs up to ~230 bytes of Python memory: this bounds a
#: reply of empty sets to about 250 MB whatever its nesting.
DEFAULT_MAX_REPLY_ITEMS = 1 << 20
#: Most bytes one reply may take on the wire (two bulk strings of ``max_bulk``).
DEFAULT_MAX_REPLY_BYTES = 2 * DEFAULT_MAX_BULK

#: What a command argument may be.
Arg = str | bytes | bytearray | memoryview | int | float

#: Commands that would stop the server answering one reply per command, in order.
_REFUSED = {
    b"$%d\r\n%s\r\n" % (len(name), name): why
    for name, why in [
        (b"SUBSCRIBE", "pub/sub"), (b"PSUBSCRIBE", "pub/sub"), (b"SSUBSCRIBE", "pub/sub"),
        (b"UNSUBSCRIBE", "pub/sub"), (b"PUNSUBSCRIBE", "pub/sub"), (b"SUNSUBSCRIBE", "pub/sub"),
        (b"MONITOR", "MONITOR"), (b"SYNC", "replication"), (b"PSYNC", "replication"),
        (b"RESET", "RESET (it drops AUTH, SELECT and HELLO: open a new connection instead)"),
    ]
}
_DOUBLE = re.compile(rb"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|-?inf|-?nan")

# Type bytes (RESP2: + - : $ *; RESP3 adds the rest).
_SIMPLE, _ERROR, _INT, _BULK, _ARRAY = 0x2B, 0x2D, 0x3A, 0x24, 0x2A
_NULL, _BOOL, _DOUBLE_T, _BIGNUM = 0x5F, 0x23, 0x2C, 0x28
_BLOB_ERROR, _VERBATIM, _MAP, _SET, _ATTR, _PUSH = 0x21, 0x3D, 0x25, 0x7E, 0x7C, 0x3E
_AGGREGATES = frozenset({_ARRAY, _MAP, _SET, _ATTR, _PUSH})
_BULKS = frozenset({_BULK, _VERBATIM, _BLOB_ERROR})
_LISTS = frozenset({_ARRAY, _PUSH})
#: Top-level values that answer no command.
_UNSOLICITED = frozenset({_PUSH, _ATTR})
#: Arguments shorter than this are framed by one format; longer ones are not copied until the join.
_SPLIT = 1 << 16
_NAMES = {_ARRAY: "array", _MAP: "map", _SET: "set", _ATTR: "attribute", _PUSH: "push"}


class _Step(enum.Enum):
    """What the parser reads next. Aggregates being filled wait on ``Connection._stack`` (its
    depth says whether the next value is a reply or an element), whatever the step."""

    LINE = 0  # a line: a scalar, or the header of a bulk string or an aggregate
    BULK = 1  # the body of the bulk string whose header was read, and its CRLF


#: For the hot path: an enum member looked up on its class costs as much as a small call.
_LINE, _BULK_STEP = _Step.LINE, _Step.BULK
_OPEN = ConnectionState.OPEN
#: A reader's "no value yet": a header opened an aggregate or announced a bulk string's body.
_MORE: Any = object()


# -- events --------------------------------------------------------------------------------------


class Event:
    """Base class of everything ``next_event()`` returns besides :data:`NEED_DATA`."""

    __slots__ = ()


@record
class Reply(Event):
    """The reply to the oldest command awaiting one: ``value`` typed as the module says."""

    value: Any


@record
class ErrorReply(Event):
    """An error reply (``-ERR ...`` or RESP3 ``!``): an answer, not a broken connection.

    Inside an aggregate (``EXEC``'s results, a script's table) an error stays an
    ``ErrorReply`` value in the list.
    """

    #: The server's message, verbatim (``"ERR unknown command ..."``).
    message: str

    @property
    def code(self) -> str:
        """The first word of the message: ``"ERR"``, ``"NOSCRIPT"``, ``"WRONGTYPE"``..."""
        return self.message.split(" ", 1)[0]


@record
class Push(Event):
    """A RESP3 push (``>``): out-of-band data that answers no command (pub/sub messages,
    client-side caching invalidations)."""

    data: list[Any]

    @property
    def kind(self) -> str:
        """The push's first element as text (``"message"``, ``"invalidate"``...)."""
        first = self.data[0] if self.data else b""
        if isinstance(first, bytes):
            return first.decode("utf-8", "replace")
        return str(first)


@record
class Attribute(Event):
    """RESP3 attributes (``|``) sent before the next reply: metadata about it."""

    value: dict[Any, Any]


@record
class ConnectionClosed(Event):
    """The server closed the connection (``receive_data(b"")``).

    ``pending`` is how many commands were still awaiting replies; ``partial`` says whether a
    reply had started arriving and was cut short.
    """

    pending: int = 0
    partial: bool = False
    reason: str = "closed by peer"


class Verbatim(bytes):
    """A RESP3 verbatim string: the text as ``bytes`` (equal to a RESP2 bulk string of the same
    text) and its three-letter ``format`` (``"txt"``, ``"mkd"``)."""

    format: str

    def __new__(cls, data: bytes, format: str) -> Verbatim:
        obj = super().__new__(cls, data)
        obj.format = format
        return obj

    def __repr__(self) -> str:
        return f"Verbatim({bytes(self)!r}, format={self.format!r})"


# -- commands ------------------------------------------------------------------------------------


def _coerce(arg: object, index: int) -> bytes:
    """The slow path of :func:`encode_command`: subclasses, buffers, refusals."""
    if isinstance(arg, bool):
        raise LocalProtocolError(
            f"argument {index} is a bool: Redis has none (send 1/0 or a string)"
        )
    if isinstance(arg, (bytes, bytearray, memoryview)):
        return bytes(arg)
    if isinstance(arg, str):
        try:
            return str(arg).encode()
        except UnicodeEncodeError as exc:
            raise LocalProtocolError(f"argument {index} is not encodable as UTF-8: {exc}") from None
    if isinstance(arg, int):
        return b"%d" % int(arg)
    if isinstance(arg, float):
        return repr(float(arg)).encode()
    raise LocalProtocolError(
        f"argument {index} is a {type(arg).__name__}: a Redis argument is str, bytes, int "
        "or float"
    )


def encode_command(args: Sequence[Arg]) -> bytes:
    """The bytes of one command: a RESP array of bulk strings.

    ``str`` is sent as UTF-8, ``int`` in decimal, ``float`` as its shortest round-trip
    ``repr`` (``inf`` and ``-inf`` as Redis spells them).

    Raises:
        LocalProtocolError: no arguments, an argument of another type (``bool`` included), a
            ``str`` that is not valid Unicode, or a command this core cannot follow (pub/sub,
            MONITOR, CLIENT REPLY, RESET, SYNC): nothing is produced.
    """
    if isinstance(args, (str, bytes)) or not args:
        raise LocalProtocolError(
            "a command is a non-empty sequence of arguments, e.g. ('GET', 'key')"
        )
    parts = [b"*%d\r\n" % len(args)]
    append = parts.append
    for index, arg in enumerate(args):
        kind = type(arg)
        if kind is bytes:
            data: bytes = arg  # type: ignore[assignment]
        elif kind is str:
            try:
                data = arg.encode()  # type: ignore[union-attr]
            except UnicodeEncodeError:
                data = _coerce(arg, index)
        elif kind is int:
            data = b"%d" % arg  # type: ignore[str-format]
        elif kind is float:
            data = repr(arg).encode()
        else:
            data = _coerce(arg, index)
        if len(data) < _SPLIT:
            append(b"$%d\r\n%s\r\n" % (len(data), data))
        else:  # a large argument is copied once, by the join
            parts += (b"$%d\r\n" % len(data), data, b"\r\n")
    head = parts[1].upper()  # the name, framed: b"$9\r\nSUBSCRIBE\r\n"
    if head in _REFUSED or (
        head == b"$6\r\nCLIENT\r\n" and len(args) > 1 and parts[2].upper() == b"$5\r\nREPLY\r\n"
    ):
        name = head.split(b"\r\n")[1].decode("ascii", "replace")
        what = _REFUSED.get(head, "CLIENT REPLY")
        raise LocalProtocolError(
            f"{name}: {what} breaks the one-reply-per-command order this connection relies on"
        )
    return b"".join(parts)


class _BulkHeads(dict[int, str]):
    """``"$<n>"``, a bulk string's header as text by its length; kept once made for lengths
    below 4096."""

    def __missing__(self, length: int) -> str:
        head = f"${length}"
        if length < 4096:
            self[length] = head
        return head


_HEADS = _BulkHeads()
#: ``*<n>\r\n$7\r\nEVALSHA\r\n$<len>\r\n<sha>\r\n$1\r\n0\r\n`` by (sha, script argument count).
_EVALSHA_HEADS: dict[tuple[str, int], bytes] = {}


def encode_evalsha(sha: str, args: Sequence[str]) -> bytes:
    """The bytes of ``EVALSHA <sha> 0 <args>...`` (no keys): those :func:`encode_command` writes
    for it. When every argument is a ``str`` and all of them are ASCII (the qless script's
    calls), the arguments are framed in one pass, as text (a ``str`` subclass is sent as its
    text); anything else goes through :func:`encode_command`.

    Raises:
        LocalProtocolError: as :func:`encode_command`.
    """
    try:
        frame = [""] * (2 * len(args) + 1)  # "$<len>", argument, ..., "" (the last CRLF)
        frame[:-1:2] = map(_HEADS.__getitem__, map(len, args))
        frame[1::2] = args
        text = "\r\n".join(frame)
    except TypeError:  # not a str (and perhaps without a len)
        return encode_command(["EVALSHA", sha, 0, *args])
    if not text.isascii() or not sha.isascii():
        return encode_command(["EVALSHA", sha, 0, *args])
    head = _EVALSHA_HEADS.get((sha, len(args)))
    if head is None:
        if len(_EVALSHA_HEADS) >= 64:
            _EVALSHA_HEADS.clear()
        head = b"*%d\r\n$7\r\nEVALSHA\r\n$%d\r\n%s\r\n$1\r\n0\r\n" % (
            len(args) + 3, len(sha), sha.encode())
        _EVALSHA_HEADS[sha, len(args)] = head
    return head + text.encode()


def command_name(args: Sequence[Arg]) -> str:
    """The command's name for messages (its first argument, as text)."""
    head = args[0] if args else ""
    if isinstance(head, str):
        return head
    if isinstance(head, (bytes, bytearray)):
        return bytes(head).decode("utf-8", "replace")
    return str(head)


# -- replies -------------------------------------------------------------------------------------


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, set):
        return frozenset(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((_hashable(k), _hashable(v)) for k, v in value.items())
    return value


def _aggregate(kind: int, items: list[Any]) -> Any:
    if kind in _LISTS:
        return items
    if kind == _SET:
        try:
            return set(items)
        except TypeError:
            return {_hashable(v) for v in items}
    it = iter(items)  # map or attribute: key, value, key, value...
    try:
        return dict(zip(it, it, strict=False))
    except TypeError:
        it = iter(items)
        return {_hashable(k): v for k, v in zip(it, it, strict=False)}


def _length(line: bytes, null_ok: bool) -> int:
    """An announced length: ASCII digits, or ``-1`` (null) where the type allows it."""
    digits = line[1:]
    if digits.isdigit() and len(digits) <= 20:  # bytes.isdigit is ASCII-only
        return int(digits)
    if null_ok and digits == b"-1":
        return -1
    if digits == b"?":
        raise RemoteProtocolError(f"streamed RESP3 type {line[:20]!r}: not sent by Redis")
    raise RemoteProtocolError(f"bad length in {line[:40]!r}")


def _integer(line: bytes, big: bool) -> int:
    digits = line[1:]
    body = digits[1:] if digits[:1] == b"-" else digits
    if not body.isdigit() or (not big and len(body) > 19):
        raise RemoteProtocolError(f"bad integer {line[:40]!r}")
    try:
        return int(digits)
    except ValueError:  # a big number past Python's int-from-text limit
        raise RemoteProtocolError(f"big number of {len(body)} digits is too long") from None


def _text_line(line: bytes) -> bytes:
    text = line[1:]
    if b"\r" in text or b"\n" in text:
        raise RemoteProtocolError(f"lone CR or LF inside {line[:60]!r}")
    return text


class Connection(InOrderClientCore):
    """The client role of one Redis connection. Not thread-safe; no I/O of its own.

    Args:
        max_bulk: largest bulk string (or verbatim string, blob error) accepted, in bytes.
        max_line: longest line accepted, CRLF included.
        max_depth: deepest nesting of aggregates accepted.
        max_array: most elements (map: pairs) one aggregate may announce.
        max_reply_items: most values one reply may hold, at every level of nesting (a push,
            or attributes sent before a reply, count as a reply of their own).
        max_reply_bytes: most bytes one reply may take on the wire, CRLFs included.
    """

    __slots__ = ("_bulk", "_bulk_kind", "_reply_bytes", "_reply_items", "_stack", "_step",
                 "max_array", "max_bulk", "max_depth", "max_line", "max_reply_bytes",
                 "max_reply_items")

    def __init__(
        self,
        *,
        max_bulk: int = DEFAULT_MAX_BULK,
        max_line: int = DEFAULT_MAX_LINE,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_array: int = DEFAULT_MAX_ARRAY,
        max_reply_items: int = DEFAULT_MAX_REPLY_ITEMS,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        super().__init__()
        for name, cap in (("max_bulk", max_bulk), ("max_line", max_line),
                          ("max_depth", max_depth), ("max_array", max_array),
                          ("max_reply_items", max_reply_items),
                          ("max_reply_bytes", max_reply_bytes)):
            if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
                raise LocalProtocolError(f"{name} must be a positive int, not {cap!r}")
        if max_line < 4:
            raise LocalProtocolError("max_line must be at least 4 (a line such as ':0\\r\\n')")
        self.max_bulk = max_bulk
        self.max_line = max_line
        self.max_depth = max_depth
        self.max_array = max_array
        self.max_reply_items = max_reply_items
        self.max_reply_bytes = max_reply_bytes
        # The reply being read so far: values announced (the top-level one, then every element
        # its aggregates announce) and bytes taken, its bulk strings' announced bodies included.
        self._reply_items = 1
        self._reply_bytes = 0
        self._step = _LINE
        # In step BULK: the awaited bulk string's announced length and type byte.
        self._bulk = 0
        self._bulk_kind = _BULK
        # Aggregates being filled, outermost first: [type byte, elements still due, items].
        self._stack: list[list[Any]] = []

    def receive_batch(self, data: bytes) -> list[Event] | None:
        """:meth:`receive_data` and the :meth:`next_event` calls after it in one step (the
        session's batch hook, ``jobwire._core.InOrderClientCore.receive_batch``) for the
        commonest read of a script call: ``data`` is exactly one whole bulk string, nothing
        else is buffered, and a command awaits it. It answers the oldest command: the
        :class:`Reply` is returned (in a list). Otherwise (and for any bulk string the parser
        would refuse: over a cap) nothing happens and it returns None.
        """
        if (
            data[:1] != b"$"
            or self._step is not _LINE
            or self._state is not _OPEN
            or self._eof
            or self._stack
            or self._buffer
            or not self._pending
        ):
            return None
        end = data.find(b"\r\n")
        digits = data[1:end]
        if not (digits.isdigit() and len(digits) <= 20 and end + 2 <= self.max_line):
            return None
        size = int(digits)
        if (
            len(data) != end + size + 4
            or not data.endswith(b"\r\n")
            or size > self.max_bulk
            or len(data) > self.max_reply_bytes
        ):
            return None
        self._pending.popleft()
        return [Reply(data[end + 2 : end + 2 + size])]

    def send(self, args: Sequence[Arg]) -> bytes:
        """Record a command as awaiting its reply and return its bytes.

        Raises:
            LocalProtocolError: the arguments cannot be sent (see :func:`encode_command`), or
                the connection is closed or poisoned. Nothing is recorded then.
        """
        if self._state is not _OPEN:
            self._check_open(command_name(args))
        data = encode_command(args)
        self._pending.append(None)
        return data

    def send_encoded(self, data: bytes, name: str = "command") -> bytes:
        """:meth:`send` for a command already encoded by :func:`encode_command` (a pipeline
        validates every command before it sends any) or :func:`encode_evalsha`, named
        ``name`` in messages. ``data`` must be exactly one command.

        Raises:
            LocalProtocolError: the connection is closed or poisoned.
        """
        if self._state is not _OPEN:
            self._check_open(name)  # raises
        self._pending.append(None)
        return data

    def _closed(self) -> ConnectionClosed:
        self._state = ConnectionState.CLOSED
        return ConnectionClosed(
            pending=len(self._pending),
            partial=bool(self._buffer) or bool(self._stack) or self._step is not _LINE,
            reason=self._closed_reason,
        )

    def _need(self) -> ConnectionClosed | NeedData:
        return self._closed() if self._eof else NEED_DATA

    def _over_reply(self, what: str, total: int) -> NoReturn:
        cap = self.max_reply_items if what == "values" else self.max_reply_bytes
        name = "max_reply_items" if what == "values" else "max_reply_bytes"
        for frame in self._stack:  # the connection is poisoned: free the partial reply now
            frame[2].clear()  # (the error's traceback keeps the parser's locals alive)
        self._stack.clear()
        raise RemoteProtocolError(f"reply of {total}+ {what} so far, over {name} {cap}")

    # -- the parser: a loop over steps; in step LINE a reader per type byte (``_READERS``) --------

    def _next_event(self) -> Event | NeedData:
        buffer = self._buffer
        stack = self._stack
        readers = _READERS
        while True:
            if self._step is _LINE:
                try:
                    line = buffer.extract_line(self.max_line)
                except LineTooLong as exc:
                    raise RemoteProtocolError(
                        f"reply line longer than {self.max_line} bytes ({exc.length}+)"
                    ) from None
                if not line:
                    return self._no_line(line)
                kind = line[0]
                if not (stack or self._pending) and kind not in _UNSOLICITED:
                    raise RemoteProtocolError(f"reply with no command awaiting it: {line[:60]!r}")
                total = self._reply_bytes = self._reply_bytes + len(line) + 2
                if total > self.max_reply_bytes:
                    self._over_reply("bytes", total)
                value = readers[kind](self, line)
                if value is _MORE:
                    continue
            else:
                value = self._read_bulk_body()
                if value is NEED_DATA:
                    return self._need()
                kind = self._bulk_kind
            if not stack:  # a top-level value: the commonest answer inline
                if kind in _UNSOLICITED:
                    return self._answer(kind, value)
                self._reply_bytes = 0  # (a scalar or an empty aggregate: still one value)
                self._pending.popleft()
                return value if type(value) is ErrorReply else Reply(value)
            event = self._fill(kind, value)
            if event is not None:
                return event

    def _no_line(self, line: bytes | None) -> ConnectionClosed | NeedData:
        """No line to read (``None``: not yet), or an empty one (a framing error)."""
        if line is None:
            return self._need()
        raise RemoteProtocolError("empty line where a value should begin")

    def _fill(self, kind: int, value: Any) -> Event | None:
        """Hand a complete value to the aggregate it belongs to, closing those it completes.
        Returns the event once the top-level value is complete, else None."""
        stack = self._stack
        while stack:
            if kind == _ATTR:  # attributes inside a value are metadata: dropped
                return None
            frame = stack[-1]
            frame[2].append(value)
            frame[1] -= 1
            if frame[1]:
                return None
            stack.pop()
            kind = frame[0]
            value = _aggregate(kind, frame[2])
        return self._answer(kind, value)

    def _answer(self, kind: int, value: Any) -> Event:
        """A complete top-level value: a push, attributes, or the oldest command's reply. The
        next reply's totals start over (its own value counts as one)."""
        self._reply_items = 1
        self._reply_bytes = 0
        if kind == _PUSH:
            return Push(value)
        if kind == _ATTR:
            return Attribute(value)
        self._pending.popleft()
        if type(value) is ErrorReply:
            return value
        return Reply(value)

    # Step BULK.

    def _read_bulk_body(self) -> Any:
        """Step BULK: the awaited bulk string's value once it and its CRLF are buffered (the
        step is LINE again), else NEED_DATA."""
        value = self._bulk_body(self._bulk, self._bulk_kind)
        if value is not NEED_DATA:
            self._step = _LINE
        return value

    def _bulk_body(self, size: int, kind: int) -> Any:
        """A bulk string's value from its body of ``size`` bytes, or NEED_DATA."""
        try:
            data = self._buffer.extract_terminated(size)  # copied once, whatever its size
        except MissingTerminator:
            raise RemoteProtocolError(f"bulk string of {size} bytes not followed by CRLF") from None
        if data is None:
            return NEED_DATA
        if kind == _BULK:
            return data
        if kind == _VERBATIM:
            if len(data) < 4 or data[3:4] != b":" or not data[:3].isascii():
                raise RemoteProtocolError(f"bad verbatim string {data[:20]!r}")
            return Verbatim(data[4:], data[:3].decode("ascii"))
        return ErrorReply(data.decode("utf-8", "replace"))

    # Step LINE: one reader per type byte, each given the whole line (type byte included) and
    # returning the value, or ``_MORE`` for a header whose value is still to come.

    def _read_bulk_header(self, line: bytes) -> Any:
        """``$``, ``=``, ``!``: a length (null ``$-1`` allowed for ``$`` only), then the body,
        waited for in step BULK unless it is buffered already."""
        kind = line[0]
        digits = line[1:]  # the common case inline: a plain length
        if digits.isdigit() and len(digits) <= 20:
            size = int(digits)
        else:
            size = _length(line, kind == _BULK)
        if size < 0:
            return None
        if size > self.max_bulk:
            raise RemoteProtocolError(
                f"bulk string of {size} bytes announced, over max_bulk {self.max_bulk}"
            )
        total = self._reply_bytes = self._reply_bytes + size + 2
        if total > self.max_reply_bytes:
            self._over_reply("bytes", total)
        value = self._bulk_body(size, kind)
        if value is NEED_DATA:
            self._bulk = size
            self._bulk_kind = kind
            self._step = _BULK_STEP
            return _MORE
        return value

    def _read_aggregate_header(self, line: bytes) -> Any:
        """``*``, ``%``, ``~``, ``>``, ``|``: a count (null ``*-1`` allowed for ``*`` only);
        a non-empty aggregate is pushed on the stack to be filled by the values that follow."""
        kind = line[0]
        stack = self._stack
        count = _length(line, kind == _ARRAY)
        if count < 0:
            return None
        if count > self.max_array:
            raise RemoteProtocolError(
                f"{_NAMES[kind]} of {count} elements announced, over max_array {self.max_array}"
            )
        if kind == _PUSH and stack:
            raise RemoteProtocolError("push inside another value")
        if len(stack) >= self.max_depth:
            raise RemoteProtocolError(f"values nested deeper than {self.max_depth}")
        if not count:
            return _aggregate(kind, [])
        due = 2 * count if kind in (_MAP, _ATTR) else count
        self._reply_items += due
        if self._reply_items > self.max_reply_items:
            self._over_reply("values", self._reply_items)
        stack.append([kind, due, []])
        return _MORE

    def _read_simple(self, line: bytes) -> str:
        return _text_line(line).decode("utf-8", "surrogateescape")

    def _read_error(self, line: bytes) -> ErrorReply:
        return ErrorReply(_text_line(line).decode("utf-8", "replace"))

    def _read_integer(self, line: bytes) -> int:
        digits = line[1:]  # the common case inline: a small non-negative integer
        if digits.isdigit() and len(digits) < 19:
            return int(digits)
        return _integer(line, False)

    def _read_big_number(self, line: bytes) -> int:
        return _integer(line, True)

    def _read_null(self, line: bytes) -> None:
        if line != b"_":
            raise RemoteProtocolError(f"bad null {line[:40]!r}")

    def _read_boolean(self, line: bytes) -> bool:
        if line == b"#t":
            return True
        if line == b"#f":
            return False
        raise RemoteProtocolError(f"bad boolean {line[:40]!r}")

    def _read_double(self, line: bytes) -> float:
        if _DOUBLE.fullmatch(line, 1) is None:
            raise RemoteProtocolError(f"bad double {line[:40]!r}")
        return float(line[1:])

    def _read_unknown(self, line: bytes) -> NoReturn:
        raise RemoteProtocolError(f"unknown RESP type in {line[:60]!r}")


#: Step LINE's readers, by type byte.
_READERS: list[Callable[[Connection, bytes], Any]] = [
    {
        **dict.fromkeys(_BULKS, Connection._read_bulk_header),
        **dict.fromkeys(_AGGREGATES, Connection._read_aggregate_header),
        _SIMPLE: Connection._read_simple,
        _ERROR: Connection._read_error,
        _INT: Connection._read_integer,
        _BIGNUM: Connection._read_big_number,
        _NULL: Connection._read_null,
        _BOOL: Connection._read_boolean,
        _DOUBLE_T: Connection._read_double,
    }.get(kind, Connection._read_unknown)
    for kind in range(256)
]
