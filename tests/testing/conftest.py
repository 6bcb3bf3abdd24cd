"""Running pytest on a fresh project that has nothing but the jobwire plugin: ``inner`` writes
test files with ``pytester`` and runs pytest on them in a subprocess (in-process, the outer
session's plugin, fixtures and servers would be shared with the inner one)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from jobwire.testing import SYSTEMS

#: Every variable the plugin reads: the inner runs start from none of them.
PLUGIN_ENV = (
    "JOBWIRE_BACKEND",
    "JOBWIRE_REQUIRE_REAL_SERVERS",
    *(f"JOBWIRE_{system.upper()}_{what}" for system in SYSTEMS for what in ("URL", "IMAGE")),
)

Inner = Callable[..., pytest.RunResult]


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Inner:
    """``inner(*args, files={name: source}, env={...})``: write the files into a fresh project
    and run ``pytest -rs -p no:cacheprovider ARGS`` there in a subprocess, with ``env`` as the
    only jobwire variables."""

    def run(*args: str, files: Mapping[str, str] | None = None,
            env: Mapping[str, str] | None = None) -> pytest.RunResult:
        for name in PLUGIN_ENV:
            monkeypatch.delenv(name, raising=False)
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        if files:
            pytester.makepyfile(**dict(files))
        return pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider", *args,
                                             timeout=300)

    return run
