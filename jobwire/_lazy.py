"""Lazy package exports: a package's public names load their modules on first use (PEP 562).

Why: ``python -m beanstalk_client.server`` (and the Gearman and Workq servers) imports the
package's ``__init__.py`` first. Importing the clients, the workers and all of anyio there only
to start a server made the bundled servers take 0.15-0.45 s to listen, and test suites that
spawn a server and connect 0.1 s later (greenstalk's does) failed against them. With lazy
exports, ``import beanstalk_client`` costs next to nothing and ``from beanstalk_client import
Client`` imports what ``Client`` needs, once.

A package lists each name once, as an ordinary import under ``if TYPE_CHECKING:`` (what type
checkers read), plus its ``__all__`` (what the docs and ``import *`` read)::

    if TYPE_CHECKING:
        from .client import Client
    __getattr__, __dir__ = lazy_exports(__name__)
    __all__ = ["Client"]

At run time that block does not run: on first use, :func:`lazy_exports` reads it from the
package's source (``from MODULE import NAME[ as ALIAS], ...`` statements only; anything else
there is an ``ImportError`` naming the line) and imports a name's module when the name is
first asked for. ``tests/beanstalk/test_start.py`` checks every package's block against its
``__all__`` and the objects the modules define.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable

__all__ = ["lazy_exports"]

_STATEMENT = re.compile(r"from\s+([\w.]+)\s+import\s+\(?([\w\s,]*?),?\s*\)?")
_NAME = re.compile(r"(\w+)(?:\s+as\s+(\w+))?")


def type_checking_imports(package: str, source: str) -> dict[str, tuple[str, str]]:
    """The names ``source`` imports under ``if TYPE_CHECKING:``: exported name -> (module,
    name in that module).

    Raises:
        ImportError: the block is missing, holds something other than ``from ... import``
            statements, or imports a name twice.
    """
    lines = source.splitlines()
    try:
        start = lines.index("if TYPE_CHECKING:") + 1
    except ValueError:
        raise ImportError(f"{package}: no 'if TYPE_CHECKING:' block to export from") from None
    statements: list[str] = []
    for line in lines[start:]:
        if line and not line[0].isspace():
            break  # the block ends at the first line that is not indented
        code = line.split("#", 1)[0].strip()
        if not code:
            continue
        if code.startswith("from ") or not statements:
            statements.append(code)
        else:
            statements[-1] += " " + code
    where: dict[str, tuple[str, str]] = {}
    for statement in statements:
        match = _STATEMENT.fullmatch(statement)
        if match is None:
            raise ImportError(f"{package}: cannot export from {statement!r} (only 'from MODULE "
                              f"import NAME, ...' under TYPE_CHECKING)")
        module, names = match.groups()
        for item in names.split(","):
            named = _NAME.fullmatch(item.strip())
            if named is None:
                raise ImportError(f"{package}: cannot export {item.strip()!r} from {module}")
            name, alias = named.groups()
            exported = alias or name
            if exported in where:
                raise ImportError(f"{package}: {exported!r} imported from {where[exported][0]} "
                                  f"and {module}")
            where[exported] = (module, name)
    return where


def lazy_exports(package: str) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """Return a module ``__getattr__`` and ``__dir__`` for ``package`` (its ``__name__``).

    The first access to a name imports its module and stores the value in the package, so
    later accesses are plain attribute lookups. A name that is not exported but is one of the
    package's submodules imports that submodule, as ``import package`` followed by
    ``package.errors`` worked when the package imported its modules eagerly.

    Raises (on first use, from the returned functions):
        ImportError: the package's source cannot be read (a sourceless install) or its
            ``TYPE_CHECKING`` block is not one this reads (see :func:`type_checking_imports`).
    """
    namespace = vars(sys.modules[package])
    table: dict[str, tuple[str, str]] = {}

    def exports() -> dict[str, tuple[str, str]]:
        if not table:
            # The loader's, which reads zip archives too; pytest's assertion rewriter, which
            # loads a plugin's packages, has none: then the file.
            get_source = getattr(namespace["__spec__"].loader, "get_source", None)
            source = get_source(package) if get_source is not None else None
            if source is None:
                try:
                    with open(namespace["__file__"], encoding="utf-8") as file:
                        source = file.read()
                except (OSError, TypeError):
                    raise ImportError(
                        f"{package}: its source is needed for its lazy exports"
                    ) from None
            table.update(type_checking_imports(package, source))
        return table

    def _submodule(name: str) -> bool:
        # Not ``import importlib.util``: that would make ``importlib`` a local name.
        from importlib.util import find_spec

        return find_spec(f"{package}.{name}") is not None

    def __getattr__(name: str) -> object:
        if name.startswith("__"):  # asked by the import system, never exported
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # A private name is a submodule first: ``from . import _module`` asks here before it
        # imports, and reading the exports costs a server's start about 3 ms (tokenize).
        private = name.startswith("_")
        if private and _submodule(name):
            return importlib.import_module(f"{package}.{name}")
        found = exports().get(name)
        if found is None:
            if not private and _submodule(name):
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, original = found
        value = getattr(importlib.import_module(module, package), original)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports()))

    return __getattr__, __dir__
