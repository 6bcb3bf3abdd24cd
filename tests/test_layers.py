"""Dependencies go one way: plumbing below, protocols in the middle, integrations on top.

* The plumbing (``jobwire`` itself: ``jobwire/__init__.py``, ``jobwire/_*.py``, ``errors``,
  ``events``, ``serializers``) imports no protocol package and no integration.
* The protocol packages (``beanstalk_client``, ``gearman_client``, ``workq_client``,
  ``qless_client``) import no integration.
* The integrations (``jobwire.cli``, ``jobwire.spark``, ``jobwire.testing``, ``jobwire.web``, and
  ``python -m jobwire``) use only the public API of the protocol packages: no module and no
  name whose name starts with ``_`` (``from qless_client import _scripts`` counts too).

Every import is read from the source (``ast``), wherever it is written: at the top, in a
function, under ``if TYPE_CHECKING:``. A failure names each offending import as file:line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ("beanstalk_client", "gearman_client", "workq_client", "qless_client")
INTEGRATIONS = (
    "jobwire.cli", "jobwire.spark", "jobwire.testing", "jobwire.web", "jobwire.__main__",
)
PACKAGES = ("jobwire", *PROTOCOLS)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _within(module: str, roots: tuple[str, ...]) -> bool:
    return any(module == root or module.startswith(root + ".") for root in roots)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _layer(module: str) -> str:
    if _within(module, INTEGRATIONS):
        return "integration"
    if _within(module, PROTOCOLS):
        return "protocol"
    return "plumbing"


def _imports(path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(line, absolute module, names taken from it) for every import in the file."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, target] if target else base)
            yield node.lineno, target, [alias.name for alias in node.names]


def _violations(path: Path) -> Iterator[str]:
    layer = _layer(_module_name(path))
    where = path.relative_to(ROOT)
    for line, target, names in _imports(path):
        what = f"{where}:{line}: {target}" + (f" import {', '.join(names)}" if names else "")
        if layer == "plumbing" and _within(target, PROTOCOLS + INTEGRATIONS):
            yield f"{what} (the plumbing imports a protocol package or an integration)"
        elif layer == "protocol" and _within(target, INTEGRATIONS):
            yield f"{what} (a protocol package imports an integration)"
        elif layer == "integration" and _within(target, PROTOCOLS):
            private = [part for part in target.split(".") if _private(part)]
            private += [name for name in names if _private(name)]
            if private:
                yield f"{what} (private to the protocol package: {', '.join(private)})"


SOURCES = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_the_layers_are_found() -> None:
    """The walk sees every layer, so an empty glob cannot pass for a clean tree."""
    layers = {_layer(_module_name(path)) for path in SOURCES}
    assert layers == {"plumbing", "protocol", "integration"}
    assert len(SOURCES) > 100


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_go_one_way(package: str) -> None:
    found = [
        violation
        for path in SOURCES
        if path.relative_to(ROOT).parts[0] == package
        for violation in _violations(path)
    ]
    assert not found, "\n".join(found)
