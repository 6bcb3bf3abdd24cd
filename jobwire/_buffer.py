"""A receive buffer for line- and length-framed protocols.

A ``bytearray`` with a read offset and a search cursor:

* consumed bytes are not moved on every extraction; the array is compacted only once the dead
  prefix is large, so a burst of thousands of pipelined replies costs O(total bytes);
* a partial line is never rescanned from its start: the search for the terminator resumes
  where the last search stopped;
* the caller gives the cap on an incomplete line, so a peer that never sends a terminator
  cannot grow memory without bound.

Line endings are strict: only ``b"\\r\\n"`` ends a line (lenient line endings were the cause of
h11's CVE-2025-43859). Framing rules (what a line may contain) belong to each protocol's core.
"""

from __future__ import annotations

__all__ = ["ReceiveBuffer"]

_COMPACT_AT = 1 << 16


class ReceiveBuffer:
    """Bytes received but not yet parsed."""

    __slots__ = ("_data", "_scan", "_start")

    def __init__(self) -> None:
        self._data = bytearray()
        self._start = 0  # first unconsumed byte
        self._scan = 0  # no CRLF starts before this index (relative to the array)

    def __len__(self) -> int:
        return len(self._data) - self._start

    def __bool__(self) -> bool:
        return len(self._data) > self._start

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes."""
        self._data += data

    def _consume(self, end: int) -> None:
        self._start = end
        if self._scan < end:
            self._scan = end
        if end == len(self._data):
            self._data.clear()
            self._start = self._scan = 0
        elif end >= _COMPACT_AT and end * 2 >= len(self._data):
            del self._data[:end]
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
        idx = data.find(b"\r\n", self._scan)
        if idx < 0:
            # The last byte may be a lone CR whose LF has not arrived yet.
            self._scan = max(self._start, len(data) - 1)
            if limit is not None and len(data) - self._start >= limit:
                raise LineTooLong(len(data) - self._start)
            return None
        if limit is not None and idx + 2 - self._start > limit:
            raise LineTooLong(idx + 2 - self._start)
        line = bytes(data[self._start : idx])
        self._consume(idx + 2)
        return line

    def extract_exactly(self, n: int) -> bytes | None:
        """Remove and return exactly ``n`` bytes, or ``None`` if fewer are buffered."""
        end = self._start + n
        if end > len(self._data):
            return None
        chunk = bytes(self._data[self._start : end])
        self._consume(end)
        return chunk

    def peek(self, n: int) -> bytes | None:
        """Return the next ``n`` bytes without consuming them, or ``None`` if fewer are buffered."""
        end = self._start + n
        if end > len(self._data):
            return None
        return bytes(self._data[self._start : end])

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
