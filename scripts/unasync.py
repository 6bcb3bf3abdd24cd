#!/usr/bin/env python3
"""Generate every package's blocking modules from its async ones (httpcore's approach).

    scripts/unasync.py          rewrite every <package>/_X_sync.py from its _X_async.py
    scripts/unasync.py --check  exit 1 if one is out of date or a rule below was never used
                                (run by the test suite)

The async module is the single source; the sync one is never edited. ``AsyncFoo`` names become
``Foo``; the generated file says at its top that it is generated. Where the two must behave
differently, the shared source calls a seam that the two transports implement differently
(:mod:`jobwire._transport`: the blocking one connects in a client's constructor, the async one
on first use). What is left is said here, where every rule is checked to be used:

* ``SUBS``: the name and keyword rules, regular expressions applied to every file.
* ``TEXT``: literal text that one file's blocking twin says differently (docstrings: "opened by
  the constructor"); each must occur exactly once in its async source.
* A block between the lines ``# unasync: async-only`` and ``# unasync: end`` is left out of the
  sync twin (a method the blocking client does not have).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SUBS = [
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"\basync with\b", "with"),
    (r"\bAsync([A-Z]\w*)", r"\1"),
    (r"\baclose\b", "close"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    # The sync twin imports the sync twins of the package's generated modules.
    (r"(?m)^from \.(_\w+)_async import\b", r"from .\1_sync import"),
]

# The blocking client's docstrings where they must say something else. Literal (old, new) pairs,
# keyed by the async source's path; applied before SUBS, so ``old`` is the async text verbatim.
TEXT: dict[str, list[tuple[str, str]]] = {
    "beanstalk_client/_client_async.py": [
        (
            "An async connection to a beanstalkd server.\n\n"
            '    ``async with AsyncClient("127.0.0.1", 11300) as client:`` connects and closes;'
            " without the\n    context manager, the first call connects (or call :meth:`connect`).",
            "A blocking connection to a beanstalkd server, opened by the constructor.",
        ),
        (
            "A call that runs out raises\n"
            "            ``OperationTimeout`` and its reply is dropped when it comes.",
            "Running out raises\n            ``OperationTimeout`` and closes the connection.",
        ),
        (
            "(TypeError); nothing is sent.\n",
            "(TypeError).\n"
            "        ConnectFailed: the server cannot be reached.\n"
            "        TLSError: the TLS handshake failed or the server's certificate was refused.\n",
        ),
        (
            "Build a client from ``beanstalk://host[:port]`` or ``unix:///path``; ``kwargs`` as"
            " for\n        the constructor.",
            "Connect to ``beanstalk://host[:port]`` or ``unix:///path``; ``kwargs`` as for the\n"
            "        constructor.",
        ),
        (
            "InvalidAddress: the URL is not one of those forms.\n",
            "InvalidAddress: the URL is not one of those forms.\n"
            "            ConnectFailed: the server cannot be reached.\n"
            "            TLSError: the TLS handshake failed or the certificate was refused.\n",
        ),
        (
            "Close the connection (what ``quit`` does). Callers still waiting get\n"
            "        ``ConnectionLost``; the server releases every job this connection still"
            " holds.",
            "Close the connection (what ``quit`` does); the server releases the jobs it held.",
        ),
    ],
    "workq_client/_client_async.py": [
        (
            "An async connection to a Workq server.\n\n"
            '    ``async with AsyncClient("127.0.0.1", 9922) as client:`` connects and closes;'
            " without the\n    context manager, the first call connects.",
            "A blocking connection to a Workq server, opened by the constructor.",
        ),
        (
            "raises ``OperationTimeout``; the late reply is dropped.",
            "raises ``OperationTimeout`` and closes the connection (the next call reopens it).",
        ),
        (
            "(TypeError); nothing is sent.\n",
            "(TypeError).\n"
            "        ConnectFailed: the server cannot be reached.\n"
            "        TLSError: the TLS handshake failed or the server's certificate was refused.\n",
        ),
        (
            "Build a client from ``workq://host[:port]``;",
            "Connect to ``workq://host[:port]``;",
        ),
        (
            "InvalidAddress: the URL is not of that form.\n",
            "InvalidAddress: the URL is not of that form.\n"
            "            ConnectFailed: the server cannot be reached.\n"
            "            TLSError: the TLS handshake failed or the certificate was refused.\n",
        ),
        (
            "Close the connection; calls still waiting get ``ConnectionLost``.\n\n"
            "        A job that reached this client for a lease whose caller gave up, and that no"
            " later\n        ``lease`` call took, stays leased until its TTR runs out: it is"
            " logged (a warning).\n        ",
            "Close the connection (idempotent).",
        ),
    ],
}

ASYNC_ONLY, END = "# unasync: async-only", "# unasync: end"


class RuleError(Exception):
    """A rule or a marker does not fit the sources."""


def pairs() -> list[tuple[Path, Path]]:
    """Every ``<package>/_X_async.py`` with the ``_X_sync.py`` generated from it."""
    return [
        (src, src.with_name(src.name[: -len("_async.py")] + "_sync.py"))
        for src in sorted(ROOT.glob("*/_*_async.py"))
    ]


def drop_async_only(source: str, name: str) -> str:
    """``source`` without its ``# unasync: async-only`` ... ``# unasync: end`` blocks."""
    out: list[str] = []
    inside = after = False
    for number, line in enumerate(source.splitlines(keepends=True), 1):
        marker = line.strip()
        if marker == ASYNC_ONLY:
            if inside:
                raise RuleError(f"{name}:{number}: {ASYNC_ONLY} inside another block")
            inside = True
        elif marker == END:
            if not inside:
                raise RuleError(f"{name}:{number}: {END} without {ASYNC_ONLY}")
            inside, after = False, True
        elif not inside:
            # A block between two blank lines leaves one.
            if not (after and not marker and out and not out[-1].strip()):
                out.append(line)
            after = False
    if inside:
        raise RuleError(f"{name}: {ASYNC_ONLY} block never ends")
    return "".join(out).rstrip("\n") + "\n"


def convert(
    source: str,
    name: str = "_api_async.py",
    text: Sequence[tuple[str, str]] = (),
    used: set[str] | None = None,
) -> str:
    """The sync twin of ``source``. Adds each SUBS pattern that matched to ``used``.

    Raises:
        RuleError: a ``text`` rule does not occur exactly once, or a block marker is unpaired.
    """
    for old, new in text:
        count = source.count(old)
        if count != 1:
            raise RuleError(f"{name}: TEXT rule found {count} times, not once: {old[:60]!r}")
        source = source.replace(old, new)
    source = drop_async_only(source, name)
    for pattern, replacement in SUBS:
        source, count = re.subn(pattern, replacement, source)
        if count and used is not None:
            used.add(pattern)
    return f"# GENERATED from {name} by scripts/unasync.py: do not edit.\n" + source


def main(argv: list[str] | None = None) -> int:
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    stale: list[Path] = []
    errors: list[str] = []
    used: set[str] = set()
    sources = {src.relative_to(ROOT).as_posix() for src, _ in pairs()}
    errors += [f"TEXT rules for {path}, which is not an async source" for path in TEXT
               if path not in sources]
    for src, dst in pairs():
        rel = src.relative_to(ROOT).as_posix()
        try:
            text = convert(src.read_text(), src.name, TEXT.get(rel, []), used)
        except RuleError as exc:
            errors.append(str(exc))
            continue
        if dst.exists() and dst.read_text() == text:
            continue
        if check:
            stale.append(dst)
        else:
            dst.write_text(text)
            print(f"wrote {dst.relative_to(ROOT)}")
    errors += [f"SUBS rule never used (remove it): {p!r}" for p, _ in SUBS if p not in used]
    for path in stale:
        errors.append(f"{path.relative_to(ROOT)} is out of date: run scripts/unasync.py")
    for error in errors:
        print(error, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
