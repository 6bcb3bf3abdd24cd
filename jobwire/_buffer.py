"""A receive buffer for line- and length-framed protocols.

The received bytes with a read offset and a search cursor:

* a chunk fed into an empty buffer is kept as it is (no copy): the common case of one read
  holding whole replies costs one slice per reply; only a chunk that arrives while bytes are
  still buffered turns the buffer into a ``bytearray`` that further chunks are appended to;
* consumed bytes are not moved on every extraction; the dead prefix is dropped only once it is
  large, so a burst of thousands of pipelined replies costs O(total bytes), and a body of any
  size is copied once more than the kernel did (appended, then extracted);
* a partial line is never rescanned from its start: the search for the terminator resumes
  where the last search stopped;
* the caller gives the cap on an incomplete line, so a peer that never sends a terminator
  cannot grow memory without bound.

Line endings are strict: only ``b"\\r\\n"`` ends a line (lenient line endings were the cause of
h11's CVE-2025-43859). Framing rules (what a line may contain) belong to each protocol's core.
"""

from __future__ import annotations

from ._typing import mypyc_attr

__all__ = ["LineTooLong", "MissingTerminator", "ReceiveBuffer"]

_COMPACT_AT = 1 << 16
#: From this size on a block is copied out of a ``bytearray`` through a memoryview (one copy
#: instead of two; below it the view costs more than the second copy).
_VIEW_AT = 1 << 12


@mypyc_attr(allow_interpreted_subclasses=True)
class ReceiveBuffer:
    """Bytes received but not yet parsed."""

    __slots__ = ("_data", "_scan", "_start")

    def __init__(self) -> None:
        # Empty exactly when nothing is buffered: everything consumed resets it to b"".
        self._data: bytes | bytearray = b""
        self._start = 0  # first unconsumed byte
        self._scan = 0  # no CRLF starts before this index (relative to the array)

    def __len__(self) -> int:
        return len(self._data) - self._start

    def __bool__(self) -> bool:
        return len(self._data) > self._start

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes."""
        buffered = self._data
        if type(buffered) is bytes:
            if not buffered:  # nothing buffered: keep the chunk itself
                self._data = data if type(data) is bytes else bytes(data)
                return
            # Bytes still buffered: from now on an array that chunks are appended to.
            start = self._start
            buffered = self._data = bytearray(memoryview(buffered)[start:])
            self._start = 0
            self._scan -= start
        buffered += data  # a bytearray here

    def _consume(self, end: int) -> None:
        data = self._data
        if end == len(data):
            self._data = b""
            self._start = self._scan = 0
            return
        self._start = end
        if self._scan < end:
            self._scan = end
        if end >= _COMPACT_AT and end * 2 >= len(data):
            if type(data) is bytes:
                self._data = data[end:]
            else:
                del data[:end]  # type: ignore[union-attr]  # a bytearray here
            self._scan -= end
            self._start = 0

    def line_length_so_far(self) -> int:
        """Bytes buffered that do not yet contain a complete line (for line caps)."""
        return len(self._data) - self._start

    def extract_line(self, limit: int | None = None) -> bytes | None:
        """Remove and return the next line without its ``\\r\\n``.

        Returns ``None`` when no complete line is buffered. With ``limit``, returns ``None`` only
        while the pending line (terminator included) could still fit in ``limit`` bytes, and
        raises :class:`LineTooLong` once it cannot.
        """
        data = self._data
        start = self._start
        idx = data.find(b"\r\n", self._scan)
        if idx < 0:
            # The last byte may be a lone CR whose LF has not arrived yet.
            self._scan = max(start, len(data) - 1)
            if limit is not None and len(data) - start >= limit:
                raise LineTooLong(len(data) - start)
            return None
        if limit is not None and idx + 2 - start > limit:
            raise LineTooLong(idx + 2 - start)
        line = data[start:idx]
        if type(line) is not bytes:
            line = bytes(line)
        end = idx + 2
        if end == len(data):  # the common cases, inline: everything read ...
            self._data = b""
            self._start = self._scan = 0
        elif end < _COMPACT_AT:  # ... or more to read, and no dead prefix to drop yet
            self._start = self._scan = end
        else:
            self._consume(end)
        return line

    def _take(self, start: int, end: int) -> bytes:
        data = self._data
        if type(data) is bytes:
            return data[start:end]
        if end - start >= _VIEW_AT:
            with memoryview(data) as view:
                return view[start:end].tobytes()
        return bytes(data[start:end])

    def extract_exactly(self, n: int) -> bytes | None:
        """Remove and return exactly ``n`` bytes, or ``None`` if fewer are buffered."""
        start = self._start
        end = start + n
        if end > len(self._data):
            return None
        chunk = self._take(start, end)
        self._consume(end)
        return chunk

    def extract_terminated(self, n: int, terminator: bytes = b"\r\n") -> bytes | None:
        """Remove ``n`` bytes and the ``terminator`` that must follow them; return the ``n``
        bytes (copied once), or ``None`` while fewer than ``n + len(terminator)`` are buffered.

        Raises:
            MissingTerminator: something else follows the ``n`` bytes (nothing is removed).
        """
        start = self._start
        end = start + n
        stop = end + len(terminator)
        data = self._data
        if stop > len(data):
            return None
        if not data.startswith(terminator, end):
            raise MissingTerminator(n)
        if stop == len(data) and type(data) is bytes:  # the common case, inline
            self._data = b""
            self._start = self._scan = 0
            return data[start:end]
        chunk = self._take(start, end)
        self._consume(stop)
        return chunk

    def peek(self, n: int) -> bytes | None:
        """Return the next ``n`` bytes without consuming them, or ``None`` if fewer are buffered."""
        end = self._start + n
        if end > len(self._data):
            return None
        return self._take(self._start, end)

    def discard(self, n: int) -> int:
        """Drop up to ``n`` bytes; return how many were dropped."""
        n = min(n, len(self._data) - self._start)
        self._consume(self._start + n)
        return n

    def discard_through_crlf(self) -> bool:
        """Drop bytes up to and including the next ``\\r\\n``.

        Returns ``True`` if a terminator was found; otherwise drops everything buffered except
        a trailing CR (which may begin the terminator) and returns ``False``.
        """
        data = self._data
        idx = data.find(b"\r\n", self._start)
        if idx >= 0:
            self._consume(idx + 2)
            return True
        keep = 1 if data.endswith(b"\r") else 0
        self._consume(len(data) - keep)
        return False


class LineTooLong(Exception):
    """A line exceeded the caller's limit. Each core turns it into its own error or reply."""

    def __init__(self, length: int) -> None:
        super().__init__(f"line of at least {length} bytes")
        self.length = length


class MissingTerminator(Exception):
    """A block of known length was not followed by its terminator. Each core turns it into
    its own error."""

    def __init__(self, length: int) -> None:
        super().__init__(f"block of {length} bytes not followed by its terminator")
        self.length = length
