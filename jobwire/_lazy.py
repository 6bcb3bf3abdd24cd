"""Lazy package exports: a package's public names load their modules on first use (PEP 562).

Why: ``python -m beanstalk_client.server`` (and the Gearman and Workq servers) imports the
package's ``__init__.py`` first. Importing the clients, the workers and all of anyio there only
to start a server made the bundled servers take 0.15-0.45 s to listen, and test suites that
spawn a server and connect 0.1 s later (greenstalk's does) failed against them. With lazy
exports, ``import beanstalk_client`` costs next to nothing and ``from beanstalk_client import
Client`` imports what ``Client`` needs, once.

A package keeps its names visible to type checkers with an ``if TYPE_CHECKING:`` block of
ordinary imports, and gives the same names to :func:`lazy_exports` for run time::

    if TYPE_CHECKING:
        from .client import Client
    __getattr__, __dir__ = lazy_exports(__name__, {".client": ["Client"]})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """Return a module ``__getattr__`` and ``__dir__`` for ``package``.

    Args:
        package: the package's ``__name__``.
        exports: module (relative to ``package``, or absolute) -> the names it provides.

    The first access to a name imports its module and stores the value in the package, so
    later accesses are plain attribute lookups. A name that is not exported but is one of the
    package's submodules imports that submodule, as ``import package`` followed by
    ``package.errors`` worked when the package imported its modules eagerly.

    Raises:
        ValueError: a name is listed under two modules.
    """
    where: dict[str, str] = {}
    for module, names in exports.items():
        for name in names:
            if name in where:
                raise ValueError(f"{package}: {name!r} listed under {where[name]} and {module}")
            where[name] = module
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            if not name.startswith("__"):
                # Not ``import importlib.util``: that would make ``importlib`` a local name.
                from importlib.util import find_spec

                if find_spec(f"{package}.{name}") is not None:
                    return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(where))

    return __getattr__, __dir__
