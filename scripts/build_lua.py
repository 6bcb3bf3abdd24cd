#!/usr/bin/env python3
"""Join the qless script's sources into the one script the package ships and loads.

    scripts/build_lua.py          rewrite qless_client/lua/qless.lua from qless_client/lua/src/
    scripts/build_lua.py --check  exit 1, showing the difference, if it is not their join
                                  (run by scripts/test)

The sources are ``qless_client/lua/src/NN_<concern>.lua``, joined in the order of their numbers:
one Lua chunk, so a file may use the locals of the files before it, never after. The shipped
``qless_client/lua/qless.lua`` is that join: a header line saying it is generated, then each
source under a ``-- from src/<name>`` line (a Redis error's ``user_script:<line>`` is a line of
the shipped file; the nearest such line above it names the source). Only the shipped file is
read at run time (``qless_client._scripts``).
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LUA = ROOT / "qless_client" / "lua"
#: What a source is named: a two-digit place in the join, then its concern.
SOURCE_NAME = re.compile(r"^(\d\d)_[a-z][a-z_]*\.lua$")
HEADER = ("-- GENERATED from qless_client/lua/src/*.lua by scripts/build_lua.py: do not edit, "
          "edit those.\n")


class BuildError(Exception):
    """The sources cannot be joined (a misnamed file, a number used twice, none at all)."""


def sources(src: Path) -> list[Path]:
    """Every file of ``src``, in join order. A file not named ``NN_<concern>.lua`` is refused
    rather than left out, so no source is silently unused."""
    files = sorted(p for p in src.iterdir() if not p.name.startswith("."))
    if not files:
        raise BuildError(f"{src} holds no source")
    places: dict[str, str] = {}
    for path in files:
        match = SOURCE_NAME.match(path.name)
        if match is None or not path.is_file():
            raise BuildError(f"{path}: a source is named NN_<concern>.lua")
        if match.group(1) in places:
            raise BuildError(f"{path}: place {match.group(1)} is {places[match.group(1)]} too")
        places[match.group(1)] = path.name
    return files


def marker(path: Path) -> str:
    """The line the join puts above a source."""
    return f"-- from src/{path.name}\n"


def join(src: Path) -> str:
    """The shipped script: the header line, then each source under its marker, a blank line
    between them."""
    parts = []
    for path in sources(src):
        text = path.read_bytes().decode("utf-8").rstrip() + "\n"
        parts.append(marker(path) + text)
    return HEADER + "\n" + "\n".join(parts)


def difference(shipped: Path, wanted: str, limit: int = 40) -> str:
    """How ``shipped`` differs from ``wanted``: a unified diff, cut at ``limit`` lines."""
    have = shipped.read_bytes().decode("utf-8") if shipped.exists() else ""
    lines = list(difflib.unified_diff(have.splitlines(keepends=True),
                                      wanted.splitlines(keepends=True),
                                      fromfile=f"{shipped.name} (shipped)",
                                      tofile=f"{shipped.name} (join of src/)"))
    if len(lines) > limit:
        lines = [*lines[:limit], f"... {len(lines) - limit} more diff lines\n"]
    return "".join(lines)


def build(lua: Path = LUA, check: bool = False) -> int:
    """Write (or, with ``check``, compare) ``lua/qless.lua`` as the join of ``lua/src``.
    Returns the exit status: 1 when checking finds a difference or the sources are
    misnamed."""
    shipped = lua / "qless.lua"
    try:
        wanted = join(lua / "src")
    except BuildError as exc:
        print(f"build_lua: {exc}", file=sys.stderr)
        return 1
    if shipped.exists() and shipped.read_bytes() == wanted.encode("utf-8"):
        return 0
    if check:
        print(f"{shipped} is not the join of {lua / 'src'}: run scripts/build_lua.py\n"
              + difference(shipped, wanted), file=sys.stderr)
        return 1
    shipped.write_bytes(wanted.encode("utf-8"))
    print(f"wrote {shipped}")
    return 0


def main(argv: list[str]) -> int:
    unknown = [a for a in argv if a != "--check"]
    if unknown:
        print(f"usage: scripts/build_lua.py [--check] (not {' '.join(unknown)})", file=sys.stderr)
        return 2
    return build(check="--check" in argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
