"""The sync command API is generated from the async one; fail when they drift apart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_sync_api_is_generated_from_async() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts/unasync.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_sync_and_async_clients_offer_the_same_methods() -> None:
    from beanstalk_client import AsyncClient, Client

    def public(cls: type) -> set[str]:
        return {name for name in dir(cls) if not name.startswith("_")}

    assert public(Client) - {"close"} == public(AsyncClient) - {"aclose", "connect"}
