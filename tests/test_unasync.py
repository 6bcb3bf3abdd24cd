"""The sync command API is generated from the async one; fail when they drift apart."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_sync_api_is_generated_from_async() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts/unasync.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("package", ["beanstalk_client", "workq_client"])
def test_sync_and_async_clients_offer_the_same_methods(package: str) -> None:
    module = importlib.import_module(package)

    def public(cls: type) -> set[str]:
        return {name for name in dir(cls) if not name.startswith("_")}

    assert (public(module.Client) - {"close"}
            == public(module.AsyncClient) - {"aclose", "connect"})


def _unasync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync", ROOT / "scripts/unasync.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_check_fails_when_a_rule_is_never_used(capsys: pytest.CaptureFixture[str]) -> None:
    unasync = _unasync()
    assert unasync.main(["--check"]) == 0
    unasync.SUBS.append((r"\bAsyncNothingHasThisName\b", "NothingHasThisName"))
    assert unasync.main(["--check"]) == 1
    assert "AsyncNothingHasThisName" in capsys.readouterr().err


def test_check_fails_when_a_text_rule_does_not_match(capsys: pytest.CaptureFixture[str]) -> None:
    unasync = _unasync()
    unasync.TEXT.setdefault("beanstalk_client/_client_async.py", []).append(
        ("a sentence no source has", "anything")
    )
    assert unasync.main(["--check"]) == 1
    assert "a sentence no source has" in capsys.readouterr().err


def test_async_only_blocks_are_left_out_of_the_sync_twin() -> None:
    unasync = _unasync()
    source = (
        "class AsyncA:\n"
        "    async def call(self) -> None:\n"
        "        await self._x()\n"
        "\n"
        "    # unasync: async-only\n"
        "    async def connect(self) -> None:\n"
        "        await self._y()\n"
        "    # unasync: end\n"
        "\n"
        "    async def aclose(self) -> None:\n"
        "        pass\n"
    )
    assert unasync.convert(source, "_a_async.py").splitlines()[1:] == [
        "class A:",
        "    def call(self) -> None:",
        "        self._x()",
        "",
        "    def close(self) -> None:",
        "        pass",
    ]
    with pytest.raises(unasync.RuleError, match="never ends"):
        unasync.convert(source.replace("    # unasync: end\n", ""), "_a_async.py")
    with pytest.raises(unasync.RuleError, match="without"):
        unasync.convert(source.replace("    # unasync: async-only\n", ""), "_a_async.py")
