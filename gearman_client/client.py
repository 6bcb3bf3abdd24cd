"""The blocking API: :class:`Client` and :class:`Admin` (generated command layer in
``_api_sync.py``) with ``with`` support and ``close()``. One thread at a time per object."""

from __future__ import annotations

from types import TracebackType

from . import _api_sync

__all__ = ["Admin", "Client"]


class Client(_api_sync.Client):
    __doc__ = _api_sync.Client.__doc__

    def close(self) -> None:
        """Close every connection."""
        self.aclose()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Admin(_api_sync.Admin):
    __doc__ = _api_sync.Admin.__doc__

    def close(self) -> None:
        """Close the connection."""
        self.aclose()

    def __enter__(self) -> Admin:
        self._transport.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
