"""The client side of the Workq protocol as a Sans-IO state machine.

    conn = Connection()
    sock.sendall(conn.send(Add("ping", b"hello", 1000, 60000)))  # commands in, bytes out
    conn.receive_data(sock.recv(65536))                           # bytes in ...
    event = conn.next_event()                                     # ... events out: OK

Why it is shaped like this:

* The server answers one connection's commands strictly in order, so the connection keeps a FIFO
  of commands awaiting replies; any number may be pipelined. A reply's shape cannot be told
  from its first line alone (``+OK 1`` starts a lease, a result and every inspect reply), so
  each reply is read by the shape its command declares (``Command.shape``).
* ``next_event()`` drains what is already buffered without another read.
* Framing is strict: lines end in CRLF only; data blocks (payloads, results, and the ``payload``
  value inside ``inspect job``/``jobs`` output, which may itself contain CRLF) are read by the
  length announced before them and must be followed by CRLF; a block over 1 MiB is refused
  before it is buffered. Any violation raises ``RemoteProtocolError`` and poisons the connection.
* Workq 0.2.0's ``inspect server`` sends 3 keys after announcing 2 (docs/workq.md): the server
  record is read past its announced count until its ``started`` key, or until the next reply begins.
* A ``-CLIENT-ERROR`` to a command that carried a data block may leave the server reading that
  block as a new command and sending a second error (docs/workq.md): the reply is returned, then the
  connection reports ``ConnectionClosed`` and refuses new commands. Open a new connection.
* What a hostile server can make the client hold is bounded: an ``inspect`` reply may announce
  no more records than the command asked for (1, or its ``limit``), a record no more than
  ``max_fields`` keys (:data:`MAX_FIELDS`) and no more than ``max_record_size`` bytes of keys
  and values (:data:`MAX_RECORD_SIZE`: a 1 MiB payload and room to spare); a reply past any of
  these raises ``RemoteProtocolError`` as soon as it is announced or read, before more of it is
  buffered. Each field is looked at once: the work is linear in what the server sends.
* EOF is ``receive_data(b"")``; ``next_event()`` then returns ``ConnectionClosed`` saying how many
  commands were left unanswered and whether a reply was cut short.
"""

from __future__ import annotations

import enum
import itertools

from jobwire._buffer import LineTooLong
from jobwire._core import ConnectionState, InOrderClientCore
from jobwire._numbers import parse_uint
from jobwire.errors import RemoteProtocolError

from ._commands import MAX_PAYLOAD, Command, Shape
from ._events import (
    NEED_DATA,
    OK,
    ConnectionClosed,
    ErrorKind,
    ErrorReply,
    InspectReply,
    JobResult,
    Leased,
    NeedData,
    Record,
    Reply,
)

__all__ = ["MAX_FIELDS", "MAX_LINE", "MAX_RECORD_SIZE", "Connection", "ConnectionState"]

#: Longest reply line accepted (data blocks are read by length and are not lines).
MAX_LINE = 65536
#: Most keys accepted in one ``inspect`` record by default (Workq 0.2.0 sends 2 to 14).
MAX_FIELDS = 256
#: Most bytes of keys and values accepted in one ``inspect`` record by default: a job's
#: largest payload and 64 KiB for its other keys (a real one needs well under 1 KiB).
MAX_RECORD_SIZE = MAX_PAYLOAD + 65536
_ERRORS = {kind.value.encode(): kind for kind in ErrorKind}
_OK_LINE = b"+OK\r\n"


class _Step(enum.Enum):
    START = 0  # a reply's first line
    HEAD = 1  # the line before a lease's payload or a result's data
    BODY = 2  # that data block
    RECORD = 3  # an inspect record's "<key> <count>" line
    FIELD = 4  # an inspect record's "<key> <value>" line


# For the hot path: an enum member looked up on its class costs as much as a small call.
_START, _HEAD, _BODY, _RECORD, _FIELD = (
    _Step.START, _Step.HEAD, _Step.BODY, _Step.RECORD, _Step.FIELD
)
_OPEN = ConnectionState.OPEN
_SHAPE_OK, _RESULT, _LEASE, _SERVER = Shape.OK, Shape.RESULT, Shape.LEASE, Shape.SERVER


def _ascii(raw: bytes, what: str) -> str:
    if not raw or not raw.isascii() or b" " in raw:
        raise RemoteProtocolError(f"bad {what}: {raw[:60]!r}")
    return raw.decode("ascii")


class Connection(InOrderClientCore):
    """The client role of one Workq connection. Not thread-safe; no I/O of its own.

    Args:
        max_fields: most keys accepted in one ``inspect`` record.
        max_record_size: most bytes of keys and values accepted in one ``inspect`` record.

    A record past either is a ``RemoteProtocolError`` (see the module docstring).
    """

    __slots__ = (
        "_count",
        "_data_size",
        "_fields",
        "_head",
        "_payload_size",
        "_record",
        "_record_size",
        "_records",
        "_started",
        "_step",
        "_ttr",
        "max_fields",
        "max_record_size",
    )

    def __init__(
        self, *, max_fields: int = MAX_FIELDS, max_record_size: int = MAX_RECORD_SIZE
    ) -> None:
        super().__init__()
        self.max_fields = max_fields
        self.max_record_size = max_record_size
        self._step = _START
        self._head: tuple[bytes, ...] = ()  # fields of a lease/result head line
        self._data_size = 0  # size of the data block after that line
        self._ttr = 0  # a lease's TTR from that line
        self._count = 0  # inspect records still to read
        self._records: list[Record] = []
        self._record: tuple[str, int] = ("", 0)  # key and announced count of the current one
        self._fields: list[tuple[str, bytes]] = []
        self._record_size = 0  # bytes of keys and values in ``_fields``
        self._started = False  # ``_fields`` holds a "started" key (the server record's last)
        self._payload_size: int | None = None  # a "payload" value of this size comes next

    def send(self, command: Command) -> bytes:
        """Record ``command`` as awaiting a reply and return its bytes (one write: docs/workq.md
        says the server wants a command and its data block together).

        Raises:
            LocalProtocolError: the connection is closed or poisoned.
        """
        if self._state is not _OPEN:
            self._check_open(command.verb)  # raises
        data = command.encode()
        self._pending.append(command)
        return data

    def receive_batch(self, data: bytes) -> list[Reply] | None:
        """:meth:`receive_data` and the :meth:`next_event` calls after it in one step (the
        session's batch hook, ``jobwire._core.InOrderClientCore.receive_batch``) for the
        commonest replies: when ``data`` is nothing but whole ``+OK`` lines, nothing else is
        buffered and every command they answer expects a bare ``+OK``, those commands are
        answered and :data:`OK` is returned once for each. Otherwise nothing happens and it
        returns None.
        """
        pending = self._pending
        if data == _OK_LINE:  # one call at a time: the commonest read of all
            if (
                pending
                and pending[0].shape is _SHAPE_OK
                and self._step is _START
                and self._state is _OPEN
                and not self._eof
                and not self._buffer
            ):
                pending.popleft()
                return [OK]
            return None
        count = len(data) // 5
        if (
            count < 2
            or len(data) != count * 5
            or len(pending) < count
            or data.count(_OK_LINE) != count  # then the lines tile ``data``
        ):
            return None
        for command in itertools.islice(pending, count):
            if command.shape is not _SHAPE_OK:
                return None
        if (
            self._step is not _START
            or self._state is not _OPEN
            or self._eof
            or self._buffer
        ):
            return None
        for _ in range(count):
            pending.popleft()
        return [OK] * count

    def _closed(self) -> ConnectionClosed:
        self._state = ConnectionState.CLOSED
        return ConnectionClosed(
            pending=len(self._pending),
            partial=bool(self._buffer) or self._step is not _START,
            reason=self._closed_reason,
        )

    def _need(self) -> ConnectionClosed | NeedData:
        return self._closed() if self._eof else NEED_DATA

    def _line(self) -> bytes | None:
        try:
            return self._buffer.extract_line(MAX_LINE)
        except LineTooLong as exc:
            raise RemoteProtocolError(
                f"reply line longer than {MAX_LINE} bytes ({exc.length}+)"
            ) from None

    def _finish(self, reply: Reply) -> Reply:
        command = self._pending.popleft()
        self._step = _START
        if (
            isinstance(reply, ErrorReply)
            and reply.kind is ErrorKind.CLIENT_ERROR
            and command.has_payload
        ):
            self._state = ConnectionState.CLOSED
            self._closed_reason = (
                f"out of step after -CLIENT-ERROR to {command.verb} (its data block may be "
                "read as a command)"
            )
        return reply

    def _next_event(self) -> Reply | ConnectionClosed | NeedData:
        while True:
            step = self._step
            if step is _START:
                line = self._line()
                if line is None:
                    return self._need()
                result = self._start(line)
                if result is not None:
                    return result
            elif step is _HEAD:
                line = self._line()
                if line is None:
                    return self._need()
                self._read_head(line)
            elif step is _BODY:
                return self._read_body()
            elif step is _RECORD:
                line = self._line()
                if line is None:
                    return self._need()
                done = self._read_record_head(line)
                if done is not None:
                    return done
            else:
                done_or_need = self._read_field()
                if done_or_need is not None:
                    return done_or_need

    def _start(self, line: bytes) -> Reply | None:
        if not self._pending:
            raise RemoteProtocolError(f"reply with no command awaiting one: {line[:60]!r}")
        command = self._pending[0]
        if line.startswith(b"-"):
            word, sep, text = line[1:].partition(b" ")
            kind = _ERRORS.get(word)
            if kind is None:
                raise RemoteProtocolError(f"unknown error reply {line[:60]!r}")
            if sep and kind in (ErrorKind.NOT_FOUND, ErrorKind.TIMEOUT) and not text:
                raise RemoteProtocolError(f"reply with a trailing space: {line[:60]!r}")
            return self._finish(ErrorReply(kind, text.decode("utf-8", "replace")))
        if line == b"+OK":
            if command.shape is not _SHAPE_OK:
                raise RemoteProtocolError(f"bare +OK cannot answer {command.verb!r} (out of step?)")
            return self._finish(OK)
        if not line.startswith(b"+OK "):
            raise RemoteProtocolError(f"{line[:60]!r} cannot answer {command.verb!r}")
        count = parse_uint(line[4:], "reply count")
        shape = command.shape
        if shape is _SHAPE_OK:
            raise RemoteProtocolError(
                f"{line[:60]!r} cannot answer {command.verb!r} (out of step?)"
            )
        if shape in (_RESULT, _LEASE, _SERVER) and count != 1:
            raise RemoteProtocolError(f"{command.verb} expects 1 record, got {count}")
        if shape in (_RESULT, _LEASE):
            self._step = _HEAD
            return None
        # inspect job/queue name one record; jobs, scheduled-jobs and queues at most ``limit``.
        most: int = getattr(command, "limit", 1)
        if count > most:
            raise RemoteProtocolError(
                f"{command.verb} asked for at most {most} records, the reply announces {count}"
            )
        self._count = count
        self._records = []
        if count == 0:
            return self._finish(InspectReply(()))
        self._step = _RECORD
        return None

    def _read_head(self, line: bytes) -> None:
        shape = self._pending[0].shape
        parts = tuple(line.split(b" "))
        if len(parts) != (3 if shape is _RESULT else 4):
            raise RemoteProtocolError(f"bad {shape.value.lower()} line {line[:80]!r}")
        _ascii(parts[0], "job id")
        if shape is _RESULT:
            if parts[1] not in (b"0", b"1"):
                raise RemoteProtocolError(f"bad success flag {parts[1][:20]!r}")
        else:
            _ascii(parts[1], "job name")
            self._ttr = parse_uint(parts[2], "ttr")
        size = parse_uint(parts[-1], "data size")
        if size > MAX_PAYLOAD:
            raise RemoteProtocolError(f"data block of {size} bytes announced, over {MAX_PAYLOAD}")
        self._head = parts
        self._data_size = size
        self._step = _BODY

    def _read_body(self) -> Reply | ConnectionClosed | NeedData:
        parts = self._head
        size = self._data_size
        chunk = self._buffer.extract_exactly(size + 2)
        if chunk is None:
            return self._need()
        if not chunk.endswith(b"\r\n"):
            raise RemoteProtocolError(f"data block of {size} bytes not followed by CRLF")
        data = chunk[:-2]
        job_id = parts[0].decode("ascii")
        if len(parts) == 3:
            return self._finish(JobResult(job_id, parts[1] == b"1", data))
        return self._finish(Leased(job_id, parts[1].decode("ascii"), self._ttr, data))

    def _read_record_head(self, line: bytes) -> Reply | None:
        key, _, raw_count = line.partition(b" ")
        name, announced = _ascii(key, "record key"), parse_uint(raw_count, "key count")
        if announced > self.max_fields:
            raise RemoteProtocolError(
                f"record {name[:40]!r} announces {announced} keys, over max_fields="
                f"{self.max_fields}"
            )
        self._record = (name, announced)
        self._fields = []
        self._record_size = 0
        self._started = False
        self._payload_size = None
        self._step = _FIELD
        return self._end_record_if_done()

    def _add_field(self, name: str, value: bytes) -> Reply | None:
        """Keep one field (within the caps) and end the record if it was the last."""
        if len(self._fields) >= self.max_fields:
            raise RemoteProtocolError(
                f"record {self._record[0][:40]!r} goes on past max_fields={self.max_fields} keys"
            )
        self._record_size += len(name) + len(value)
        if self._record_size > self.max_record_size:
            raise RemoteProtocolError(
                f"record {self._record[0][:40]!r} goes on past max_record_size="
                f"{self.max_record_size} bytes"
            )
        self._fields.append((name, value))
        if name == "started":
            self._started = True
        return self._end_record_if_done()

    def _end_record_if_done(self) -> Reply | None:
        key, announced = self._record
        if len(self._fields) < announced:
            return None
        if self._pending[0].shape is _SERVER and not self._started:
            # Workq 0.2.0 announces 2 keys and sends 3: read on until "started", unless the
            # next reply has already begun.
            nxt = self._buffer.peek(1)
            if nxt is None and not self._eof:
                self._step = _FIELD
                return None
            if nxt is not None and nxt not in (b"+", b"-"):
                self._step = _FIELD
                return None
        self._records.append(Record(key, tuple(self._fields), announced))
        self._count -= 1
        if self._count:
            self._step = _RECORD
            return None
        return self._finish(InspectReply(tuple(self._records)))

    def _read_field(self) -> Reply | ConnectionClosed | NeedData | None:
        buffer = self._buffer
        key, announced = self._record
        if len(self._fields) >= announced:  # the server record's unannounced keys
            nxt = buffer.peek(1)
            if nxt is None:
                return self._need()
            if nxt in (b"+", b"-"):
                self._records.append(Record(key, tuple(self._fields), announced))
                self._count -= 1
                if self._count:
                    self._step = _RECORD
                    return None
                return self._finish(InspectReply(tuple(self._records)))
        size = self._payload_size
        if size is not None:
            prefix = buffer.peek(8)
            if prefix is None:
                return self._need()
            if prefix == b"payload ":
                chunk = buffer.extract_exactly(8 + size + 2)
                if chunk is None:
                    return self._need()
                if not chunk.endswith(b"\r\n"):
                    raise RemoteProtocolError(f"payload of {size} bytes not followed by CRLF")
                self._payload_size = None
                return self._add_field("payload", chunk[8:-2])
        line = self._line()
        if line is None:
            return self._need()
        raw_key, sep, value = line.partition(b" ")
        if not sep:
            raise RemoteProtocolError(f"bad key line {line[:80]!r}")
        name = _ascii(raw_key, "key")
        if name == "payload-size":
            size = parse_uint(value, "payload-size")
            if size > MAX_PAYLOAD:
                raise RemoteProtocolError(f"payload-size {size} over {MAX_PAYLOAD}")
            if self._record_size + len(name) + len(value) + 7 + size > self.max_record_size:
                raise RemoteProtocolError(
                    f"record {self._record[0][:40]!r} with a {size}-byte payload would go past "
                    f"max_record_size={self.max_record_size} bytes"
                )
            self._payload_size = size
        elif name == "payload":
            raise RemoteProtocolError("payload value without a payload-size before it")
        return self._add_field(name, value)
