"""The blocking API: :class:`Client` and :class:`Admin`, generated from the async command layer
(``_api_sync.py`` from ``_api_async.py``), ``with`` blocks and ``close()`` included. One thread
at a time per object."""

from __future__ import annotations

from ._api_sync import Admin, Client

__all__ = ["Admin", "Client"]
