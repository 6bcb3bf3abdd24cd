"""Build the optional compiled (mypyc) build of the Sans-IO cores into a directory outside the tree.

    .venv/bin/python scripts/build_compiled.py DIR     # about 15 s on one core
    PYTHONPATH=DIR .venv/bin/python -P ...             # runs the compiled build

It copies the five packages to ``DIR`` (no ``__pycache__``, no earlier extension modules),
compiles the modules of :data:`COMPILED` there with mypyc (``mypy`` with ``mypyc``, and a C
compiler), leaving each ``.so`` next to its ``.py`` (Python imports the extension first), and
then checks, in a fresh interpreter on ``PYTHONPATH=DIR``, that each of those modules is the
extension. The source tree is left as it was: the pure-Python package stays the default.

``-P`` matters: without it the current directory comes first on ``sys.path`` and, run from the
project's root, its pure-Python packages win. An editable install's finder comes after
``PYTHONPATH``, so it does not. See docs/compiled.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("jobwire", "beanstalk_client", "gearman_client", "workq_client", "qless_client")
#: What mypyc compiles: the shared Sans-IO core and the beanstalk client's core and session.
COMPILED = (
    "jobwire/_buffer.py",
    "jobwire/_core.py",
    "jobwire/_pending.py",
    "jobwire/_session.py",
    "jobwire/_numbers.py",
    "beanstalk_client/_protocol.py",
    "beanstalk_client/_session.py",
)


def module_names() -> list[str]:
    """The dotted names of :data:`COMPILED`."""
    return [path.removesuffix(".py").replace("/", ".") for path in COMPILED]


def copy_packages(out: Path) -> None:
    """The packages' sources in ``out``, replacing what an earlier build left there."""
    out.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc")
    for package in PACKAGES:
        shutil.rmtree(out / package, ignore_errors=True)
        shutil.copytree(ROOT / package, out / package, ignore=ignore)


def compile_modules(out: Path) -> None:
    """mypyc on :data:`COMPILED`, in ``out``; raises ``CalledProcessError`` when it fails."""
    env = dict(os.environ, MYPYC_OPT_LEVEL=os.environ.get("MYPYC_OPT_LEVEL", "3"))
    env.pop("PYTHONPATH", None)
    subprocess.run(
        [sys.executable, "-m", "mypyc", *COMPILED], cwd=out, env=env, check=True,
        stdout=subprocess.DEVNULL if not os.environ.get("JOBWIRE_BUILD_VERBOSE") else None,
    )


def check_extensions(out: Path) -> list[str]:
    """Each compiled module's ``__file__`` as a fresh interpreter on ``PYTHONPATH=out`` imports
    it; raises ``RuntimeError`` when one is not the extension module."""
    names = module_names()
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    print(importlib.import_module(name).__file__)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(out))
    result = subprocess.run(
        [sys.executable, "-P", "-c", code], cwd=ROOT, env=env, check=True,
        capture_output=True, text=True,
    )
    files = result.stdout.split()
    wrong = [file for file in files if not file.endswith(".so")]
    if wrong or len(files) != len(names):
        raise RuntimeError(f"not the compiled modules: {wrong or files}")
    return files


def build(out: Path) -> list[str]:
    """Copy, compile and check; the extension modules' paths."""
    out = out.resolve()
    if out == ROOT or ROOT in out.parents:
        raise ValueError(f"build outside the source tree, not in {out}")
    copy_packages(out)
    compile_modules(out)
    return check_extensions(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="where to build (outside the source tree)")
    args = parser.parse_args()
    for file in build(args.dir):
        print(file)
    print(f"compiled build in {args.dir.resolve()}: PYTHONPATH={args.dir.resolve()} python -P ...")


if __name__ == "__main__":
    main()
