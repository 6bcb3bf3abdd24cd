"""The long fuzzer: the checks of ``tests/fuzz`` (``tests/fuzz/harness.py``) for minutes, not
seconds. Run it through ``scripts/fuzz`` (which sets up the venv); not part of CI.

    scripts/fuzz beanstalk --minutes 10
    scripts/fuzz all --minutes 2            # each protocol in turn
    scripts/fuzz resp --engine random       # without atheris

Two engines, the same checks:

* ``atheris`` (Google's coverage-guided fuzzer for Python, on libFuzzer), when it can be imported:
  the jobwire packages are instrumented, and libFuzzer mutates the seed corpus towards new
  coverage. ``pip install atheris`` (a wheel exists for CPython 3.11 on x86-64 Linux; atheris
  is optional and in no extra of pyproject.toml).
* ``random``, the fallback (and ``--engine random``): random mutations of the seed corpus
  (``harness.mutate``), keeping as new seeds the inputs whose outcome (role, event kinds, error)
  was not seen before, so it goes deeper than one mutation from the corpus.

An input is: one byte that picks the role, one that seeds the random chunking, then the bytes;
for a client role, the commands it sends (a client half) and the bytes it reads, separated by
:data:`SEP`. The seeds are the corpus pairs in that form, for every role. Inputs are at most
``--max-len`` bytes (4096 by default).

Every input runs :func:`harness.check` (one piece, byte by byte, a random chunking; typed events
or ProtocolError only; caps; no hang). A failure does not stop the run: it is counted, grouped
by exception type and place, and its input saved under ``--artifacts`` (replay one with
``--replay FILE``). At the end (or every 30 s) a summary: inputs tried, inputs per second,
exceptions found, distinct ones.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ("beanstalk", "gearman", "workq", "resp")
#: Separates a client role's commands (before) from the bytes it reads (after).
SEP = b"\xff--jobwire-fuzz--\xff"


def _import_targets() -> ModuleType:
    """The harness, and with it every core under test (imported here so atheris can instrument
    them when this runs inside ``atheris.instrument_imports()``)."""
    sys.path.insert(0, str(ROOT))
    import tests.fuzz.harness as harness

    return harness


class Run:
    """The state of one fuzzing run of one protocol."""

    def __init__(self, harness: ModuleType, protocol: str, seconds: float, artifacts: Path,
                 engine: str) -> None:
        self.harness = harness
        self.protocol = protocol
        self.roles: tuple[Any, ...] = harness.ROLES[protocol]
        self.engine = engine
        self.artifacts = artifacts / protocol
        self.started = time.monotonic()
        self.deadline = self.started + seconds
        self.last_report = self.started
        self.inputs = 0
        self.failures = 0
        self.distinct: dict[str, tuple[int, str]] = {}  # signature -> (count, artifact)
        self.outcomes: set[tuple[Any, ...]] = set()

    def seeds(self) -> list[bytes]:
        """Every corpus pair for every role, in the input format."""
        out = []
        for entry in self.harness.load_corpus(self.protocol):
            for index, role in enumerate(self.roles):
                data, context = self.harness.role_input(role, entry)
                body = context + SEP + data if role.feeds_on == "server" else data
                out.append(bytes([index, 0]) + body)
        return out

    def decode(self, raw: bytes) -> tuple[Any, bytes, bytes, int]:
        """(role, data, context, chunking seed) of an input."""
        role = self.roles[raw[0] % len(self.roles)] if raw else self.roles[0]
        seed = raw[1] if len(raw) > 1 else 0
        context, sep, data = raw[2:].partition(SEP)
        if not sep:
            context, data = b"", raw[2:]
        return role, data, context, seed

    def one(self, raw: bytes) -> None:
        """Check one input; record a failure instead of raising."""
        self.inputs += 1
        role, data, context, seed = self.decode(raw)
        harness = self.harness
        try:
            cuts = [harness.random_cuts(data, random.Random(seed))]
            outcome = harness.check(role, data, context, cuts)
        except Exception as exc:  # a finding: any exception is one
            self.record(raw, exc)
        else:
            kinds = tuple(sorted({e.split(":", 1)[0] for e in outcome.events}))
            self.outcomes.add((role.name, kinds, outcome.error))
        now = time.monotonic()
        if now - self.last_report >= 30:
            self.last_report = now
            self.report(final=False)
        if now >= self.deadline:
            self.report(final=True)
            sys.stdout.flush()
            os._exit(1 if self.failures else 0)

    def record(self, raw: bytes, exc: BaseException) -> None:
        self.failures += 1
        if isinstance(exc, self.harness.FuzzFailure):  # grouped by what failed
            signature = "FuzzFailure: " + re.sub(r"\d+", "N", str(exc).split("\n")[0])[:120]
        else:  # grouped by where it was raised in the code under test
            frames = traceback.extract_tb(exc.__traceback__)
            where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames)
                          if "/tests/" not in f.filename and "/scripts/" not in f.filename), "?")
            signature = f"{type(exc).__name__} at {where}"
        count, path = self.distinct.get(signature, (0, ""))
        if not path:
            self.artifacts.mkdir(parents=True, exist_ok=True)
            target = self.artifacts / f"{type(exc).__name__}-{hashlib.sha1(raw).hexdigest()[:12]}"
            target.write_bytes(raw)
            path = str(target)
            print(f"\n!! {signature}\n   input saved to {path}\n" +
                  "".join(traceback.format_exception(exc)[-6:]), flush=True)
        self.distinct[signature] = (count + 1, path)

    def report(self, *, final: bool) -> None:
        elapsed = time.monotonic() - self.started
        head = "== done" if final else "..."
        print(f"{head} {self.protocol} [{self.engine}] {elapsed:.0f} s: {self.inputs} inputs "
              f"({self.inputs / max(elapsed, 1e-9):.0f}/s), {len(self.outcomes)} distinct "
              f"outcomes, {self.failures} exceptions ({len(self.distinct)} distinct)", flush=True)
        if final:
            for signature, (count, path) in sorted(self.distinct.items()):
                print(f"   {count:6d} x {signature}\n            e.g. {path}")


def run_random(run: Run, max_len: int, seed: int) -> None:
    """The fallback engine: mutate seeds; keep inputs with an outcome not seen before."""
    rng = random.Random(seed)
    pool = run.seeds()
    donors = [s[2:] for s in pool]
    for raw in list(pool):
        run.one(raw)
    while True:
        parent = rng.choice(pool)
        child = bytes([rng.randrange(256), rng.randrange(256)]) if rng.random() < 0.1 else b""
        child = child + parent[len(child):]
        child = child[:2] + run.harness.mutate(child[2:], rng, donors, max_len - 2)
        before = len(run.outcomes)
        run.one(child)
        if len(run.outcomes) > before and len(pool) < 5000:
            pool.append(child)


def run_atheris(run: Run, atheris: Any, max_len: int, seed: int, seconds: float) -> None:
    corpus = Path(tempfile.mkdtemp(prefix=f"jobwire-fuzz-{run.protocol}-"))
    for raw in run.seeds():
        (corpus / hashlib.sha1(raw).hexdigest()).write_bytes(raw[:max_len])
    args = [sys.argv[0], str(corpus), f"-max_len={max_len}", f"-seed={seed}",
            f"-max_total_time={int(seconds) + 60}", "-timeout=20", "-rss_limit_mb=4096",
            "-print_final_stats=0"]
    atheris.Setup(args, run.one)
    atheris.Fuzz()


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Fuzz the Sans-IO cores for minutes (the checks of tests/fuzz).")
    parser.add_argument("protocol", choices=[*PROTOCOLS, "all"])
    parser.add_argument("--minutes", type=float, default=2.0, help="per protocol (default 2)")
    parser.add_argument("--engine", choices=["auto", "atheris", "random"], default="auto",
                        help="auto: atheris when importable, else random")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-len", type=int, default=4096, help="largest input, in bytes")
    parser.add_argument("--artifacts", type=Path,
                        default=Path(tempfile.gettempdir()) / "jobwire-fuzz",
                        help="where failing inputs are saved")
    parser.add_argument("--replay", type=Path, help="check one saved input and show the error")
    args = parser.parse_args()

    if args.protocol == "all":  # one process each: atheris.Fuzz() never returns
        status = 0
        for protocol in PROTOCOLS:
            argv = [sys.executable, __file__, protocol, *sys.argv[2:]]
            status |= subprocess.run(argv, check=False).returncode
        return status

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    atheris: Any = None
    if args.engine != "random" and not args.replay:
        try:
            atheris = importlib.import_module("atheris")
        except ImportError:
            if args.engine == "atheris":
                parser.error("atheris is not installed (pip install atheris)")
            print("atheris not importable: using the random-mutation engine", file=sys.stderr)
    engine = "atheris" if atheris is not None else "random"
    if atheris is not None:
        with atheris.instrument_imports():  # instrument the cores as they are imported
            harness = _import_targets()
    else:
        harness = _import_targets()

    run = Run(harness, args.protocol, args.minutes * 60, args.artifacts, engine)
    if args.replay:
        role, data, context, chunk_seed = run.decode(args.replay.read_bytes())
        print(f"{role.name}: {len(data)} bytes, context {len(context)} bytes, seed {chunk_seed}")
        cuts = [harness.random_cuts(data, random.Random(chunk_seed))]
        print(harness.check(role, data, context, cuts))
        return 0
    print(f"fuzzing {args.protocol} for {args.minutes:g} min with {engine} (seed {seed}, "
          f"roles: {', '.join(r.name for r in run.roles)})", flush=True)
    if atheris is not None:
        run_atheris(run, atheris, args.max_len, seed, args.minutes * 60)
    else:
        run_random(run, args.max_len, seed)
    return 0  # not reached: Run.one exits at the deadline


if __name__ == "__main__":
    sys.exit(main())
