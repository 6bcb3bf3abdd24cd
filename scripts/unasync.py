#!/usr/bin/env python3
"""Generate the sync command API from the async one (httpcore's approach).

    scripts/unasync.py          rewrite beanstalk_client/_api_sync.py
    scripts/unasync.py --check  exit 1 if it is out of date (run by the test suite)

Only the command-method layer is generated; the transports (client.py, aio.py) are written by
hand and stay thin because every protocol rule is in the Sans-IO core.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAIRS = [(ROOT / "beanstalk_client/_api_async.py", ROOT / "beanstalk_client/_api_sync.py")]

SUBS = [
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bAsyncCommands\b", "Commands"),
    (r"The beanstalk commands as async methods: the single source of the client API\.",
     "The beanstalk commands as blocking methods. GENERATED from _api_async.py: do not edit."),
]


def convert(source: str) -> str:
    for pattern, replacement in SUBS:
        source = re.sub(pattern, replacement, source)
    return source


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for src, dst in PAIRS:
        text = convert(src.read_text())
        if dst.exists() and dst.read_text() == text:
            continue
        if check:
            stale.append(dst)
        else:
            dst.write_text(text)
            print(f"wrote {dst.relative_to(ROOT)}")
    for path in stale:
        print(f"{path.relative_to(ROOT)} is out of date: run scripts/unasync.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
