"""The server side of a Gearman connection as a Sans-IO state machine (used by the bundled server).

Bytes in, requests out: binary packets (first byte NUL) and admin text lines (anything else),
as gearmand tells them apart, message by message. Replies out: packets with ``\\0RES`` magic and
admin text. What gearmand 1.1.20 does with bad input (docs/gearman.md, transcript), and so what this
core reports:

* bad magic or an unknown packet type: gearmand closes the connection without a reply. Here
  :meth:`ServerConnection.next_event` raises ``RemoteProtocolError``; the server closes.
* a request sent with ``\\0RES`` magic: gearmand answers ERROR INVALID_MAGIC. Here the packet is
  consumed and :class:`WrongMagic` returned.
* packets that only a server sends, type 5, ALL_YOURS and SUBMIT_JOB_SCHED are returned as
  packets; the server state answers them ERROR INVALID_COMMAND.
"""

from __future__ import annotations

from jobwire.errors import LocalProtocolError, RemoteProtocolError

from ._admin import MAX_LINE, extract_text_line
from ._events import NEED_DATA, ConnectionClosed, NeedData, WrongMagic
from ._packets import (
    DEFAULT_MAX_BODY_SIZE,
    PACKETS,
    REQ,
    RES,
    Packet,
    PacketDecoder,
    decode_body,
    encode_packet,
)
from ._protocol import SERVER_SENDS

__all__ = ["AdminLine", "ServerConnection"]


class AdminLine(str):
    """An admin text command line, without its line ending."""

    __slots__ = ()


class ServerConnection:
    """The server role of one connection.

    Args:
        max_body_size: largest request body accepted (gearmand has no limit of its own; the
            bundled server uses 64 MiB).
    """

    __slots__ = ("_closed_reported", "_decoder", "_eof", "_error")

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> None:
        self._decoder = PacketDecoder(REQ, max_body_size)
        self._eof = False
        self._closed_reported = False
        self._error: RemoteProtocolError | None = None

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the client; ``b""`` means it closed its side.

        Raises:
            LocalProtocolError: bytes fed after ``b""`` (the rule of every core: the caller is
                out of step); nothing is fed.
        """
        if data:
            if self._eof:
                raise LocalProtocolError("receive_data after EOF")
            self._decoder.feed(data)
        else:
            self._eof = True

    @property
    def partial(self) -> bool:
        """True while part of a request (a packet or an admin line) is buffered (the server's
        line timeout runs meanwhile)."""
        return self._decoder.buffered > 0

    def next_event(self) -> Packet | AdminLine | WrongMagic | ConnectionClosed | NeedData:
        """The next request from what is buffered.

        Raises:
            RemoteProtocolError: bad magic, unknown type, oversized body, malformed arguments,
                or an admin line over the limit. The connection should be closed.
        """
        if self._error is not None:
            raise RemoteProtocolError(str(self._error))
        try:
            event = self._next()
        except RemoteProtocolError as exc:
            self._error = exc
            raise
        if event is NEED_DATA and self._eof and not self._closed_reported:
            self._closed_reported = True
            return ConnectionClosed(0, self._decoder.buffered > 0)
        return event

    def _next(self) -> Packet | AdminLine | WrongMagic | NeedData:
        decoder = self._decoder
        buf = decoder.buffer
        first = buf.peek(1)
        if first is None:
            return NEED_DATA
        if first != b"\0":
            line = extract_text_line(buf, MAX_LINE)
            if line is None:
                return NEED_DATA
            return AdminLine(line.decode("utf-8", "surrogateescape"))
        head = buf.peek(8)
        if head is None:
            if buf.peek(4) not in (None, REQ, RES):
                raise RemoteProtocolError(f"bad magic {buf.peek(4)!r}")
            return NEED_DATA
        magic = head[:4]
        if magic not in (REQ, RES):
            raise RemoteProtocolError(f"bad magic {magic!r}")
        ptype = int.from_bytes(head[4:8], "big")
        if ptype not in PACKETS:
            raise RemoteProtocolError(f"unknown packet type {ptype}")
        header = decoder.next_header()
        if header is None:
            return NEED_DATA
        _, _, size = header
        body = decoder.take_body(size)
        if magic == RES:
            return WrongMagic(ptype)
        return decode_body(ptype, body)

    def send(self, packet: Packet) -> bytes:
        """Encode a packet for the client (``\\0RES`` magic).

        Raises:
            LocalProtocolError: ``packet`` is one only clients send.
        """
        if type(packet) not in SERVER_SENDS:
            raise LocalProtocolError(f"{type(packet).__name__} is sent by clients, not servers")
        return encode_packet(packet, RES)
