"""docs/testing.md's complete example runs as it stands, in a fresh project with nothing but the
plugin, so the page cannot go stale."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobwire.testing import find_binary, unavailable

from .conftest import Inner

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
MARKER = "<!-- example: test_with_jobwire_plugin.py -->"


def example() -> str:
    """The ```python block right after the marker comment."""
    text = DOC.read_text()
    found = re.search(re.escape(MARKER) + r"\n```python\n(.*?)\n```\n", text, re.DOTALL)
    assert found, f"{DOC} has no python block after {MARKER}"
    return found.group(1) + "\n"


def test_the_example_is_a_whole_test_file() -> None:
    source = example()
    compile(source, "test_with_jobwire_plugin.py", "exec")
    assert source.count("\ndef test_") + source.count("\nasync def test_") == 5


@pytest.mark.slow
def test_the_documented_example_passes(inner: Inner, pytester: pytest.Pytester) -> None:
    if find_binary("redis-server") is None:
        unavailable("redis-server is not installed (the example's qless test needs it)")
    (pytester.path / "test_with_jobwire_plugin.py").write_text(example())
    result = inner()
    # the async tests run on each anyio backend installed (asyncio, and trio: jobwire[trio])
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 5, result.stdout.str()
    assert not any(outcomes.get(k) for k in ("failed", "errors", "skipped")), result.stdout.str()
