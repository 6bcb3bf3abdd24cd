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

A *large* input has :data:`LARGE` (0xFF) as its second byte: its third picks the size (16 KiB
to 4 MiB, at most ``--large-max``) and the rest is material for :func:`harness.grow`, which
builds from it (and from the corpus and the hostile pieces) an input of that size and its
commands; it goes to the role's core with its default caps (``harness.LARGE_ROLES``), in one
piece and split at random points into up to 4,096 ``receive_data`` calls. Large inputs take at
most ``--large-share`` of the run's time (0.2 by default; 0: none): the random engine makes one
whenever they are below that share, and an atheris input that asks for one while they are over
it runs as a small one.

Every input runs :func:`harness.check` (one piece, byte by byte, a random chunking; typed events
or ProtocolError only; caps; no hang). A failure does not stop the run: it is counted, grouped
by exception type and place, and its input saved under ``--artifacts`` (replay one with
``--replay FILE``). At the end (or every 30 s) a summary: inputs tried, inputs per second,
exceptions found, distinct ones; per role, its inputs and inputs/s (the time spent in that
role's checks), small and large apart; and the load average, since the rates depend on it.
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
#: The second byte of a large input.
LARGE = 0xFF
#: Sizes of large inputs, picked by their third byte.
LARGE_SIZES = tuple(16384 << n for n in range(9))  # 16 KiB .. 4 MiB


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _import_targets() -> ModuleType:
    """The harness, and with it every core under test (imported here so atheris can instrument
    them when this runs inside ``atheris.instrument_imports()``)."""
    sys.path.insert(0, str(ROOT))
    import tests.fuzz.harness as harness

    return harness


class Run:
    """The state of one fuzzing run of one protocol."""

    def __init__(self, harness: ModuleType, protocol: str, seconds: float, artifacts: Path,
                 engine: str, large_share: float = 0.0, large_max: int = LARGE_SIZES[-1]) -> None:
        self.harness = harness
        self.protocol = protocol
        self.roles: tuple[Any, ...] = harness.ROLES[protocol]
        self.large_roles: tuple[Any, ...] = harness.LARGE_ROLES[protocol]
        self.large_share = large_share
        self.large_max = large_max
        # Per (role name, large?): [inputs, seconds in its checks, bytes fed].
        self.per_role: dict[tuple[str, bool], list[float]] = {}
        self.large_seconds = 0.0
        self.load_start = _load()
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
        """Every corpus pair for every role, in the input format; and, when large inputs are
        on, four large ones per role (material: the start of a corpus half), so that atheris
        has some to mutate."""
        out = []
        entries = self.harness.load_corpus(self.protocol)
        for entry in entries:
            for index, role in enumerate(self.roles):
                data, context = self.harness.role_input(role, entry)
                body = context + SEP + data if role.feeds_on == "server" else data
                out.append(bytes([index, 0]) + body)
        if self.large_share > 0:
            for index, role in enumerate(self.roles):
                for n, size in enumerate((2, 4, 6, 8)):  # 64 KiB, 256 KiB, 1 MiB, 4 MiB
                    material = self.harness.role_input(role, entries[n % len(entries)])[0]
                    out.append(bytes([index, LARGE, size]) + material[:64])
        return out

    def large_allowed(self) -> bool:
        """Whether large inputs are below their share of the time so far."""
        elapsed = time.monotonic() - self.started
        return self.large_share > 0 and self.large_seconds <= self.large_share * elapsed

    def decode(self, raw: bytes) -> tuple[Any, bytes, bytes, list[list[bytes]], int]:
        """(role, data, context, chunkings, bytewise limit) of an input."""
        index = raw[0] if raw else 0
        if len(raw) > 2 and raw[1] == LARGE:
            role = self.large_roles[index % len(self.large_roles)]
            size = min(LARGE_SIZES[raw[2] % len(LARGE_SIZES)], self.large_max)
            rng = random.Random(raw)
            data, context = self.harness.grow(role, raw[3:], rng, size)
            return role, data, context, [self.harness.many_cuts(data, rng)], 0
        role = self.roles[index % len(self.roles)]
        seed = raw[1] if len(raw) > 1 else 0
        context, sep, data = raw[2:].partition(SEP)
        if not sep:
            context, data = b"", raw[2:]
        return role, data, context, [self.harness.random_cuts(data, random.Random(seed))], 1 << 16

    def one(self, raw: bytes) -> None:
        """Check one input; record a failure instead of raising."""
        self.inputs += 1
        if len(raw) > 2 and raw[1] == LARGE and not self.large_allowed():
            raw = raw[:1] + bytes([LARGE - 1]) + raw[2:]  # a small input (as saved, if it fails)
        started = time.monotonic()
        large = len(raw) > 2 and raw[1] == LARGE
        role = None
        data = b""
        try:
            role, data, context, cuts, bytewise_limit = self.decode(raw)
            outcome = self.harness.check(role, data, context, cuts,
                                         bytewise_limit=bytewise_limit)
        except Exception as exc:  # a finding: any exception is one
            self.record(raw, exc)
        else:
            kinds = tuple(sorted({e.split(":", 1)[0] for e in outcome.events}))
            self.outcomes.add((role.name, kinds, outcome.error))
        now = time.monotonic()
        if role is not None:
            stats = self.per_role.setdefault((role.name, large), [0, 0.0, 0])
            stats[0] += 1
            stats[1] += now - started
            stats[2] += len(data)
        if large:
            self.large_seconds += now - started
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
              f"outcomes, {self.failures} exceptions ({len(self.distinct)} distinct); "
              f"{_load()}", flush=True)
        if final:
            print(f"   at the start: {self.load_start}")
            for (name, large), (count, seconds, size) in sorted(self.per_role.items()):
                what = "large" if large else "small"
                rate = count / max(seconds, 1e-9)
                print(f"   {name:27s} {what}: {int(count):8d} inputs, {rate:7.1f}/s in its "
                      f"checks, {size / max(count, 1) / 1024:8.1f} KiB each")
            for signature, (count, path) in sorted(self.distinct.items()):
                print(f"   {count:6d} x {signature}\n            e.g. {path}")


def run_random(run: Run, max_len: int, seed: int) -> None:
    """The fallback engine: mutate seeds; keep inputs with an outcome not seen before. A large
    input (material: a mutated seed) whenever large inputs are below their share of the time."""
    rng = random.Random(seed)
    pool = run.seeds()
    donors = [s[2:] for s in pool]
    for raw in list(pool):
        run.one(raw)
    while True:
        parent = rng.choice(pool)
        if run.large_allowed():
            material = run.harness.mutate(rng.choice(donors), rng, donors, 256)
            run.one(bytes([rng.randrange(256), LARGE, rng.randrange(256)]) + material)
            continue
        child = bytes([rng.randrange(256), rng.randrange(LARGE)]) if rng.random() < 0.1 else b""
        child = child + parent[len(child):]
        child = child[:2] + run.harness.mutate(child[2:], rng, donors, max_len - 2)
        before = len(run.outcomes)
        run.one(child)
        if len(run.outcomes) > before and len(pool) < 5000:
            pool.append(child)


def run_atheris(run: Run, atheris: Any, max_len: int, seed: int, seconds: float) -> None:
    """libFuzzer's own timeout is 600 s per input: a large input of two million tiny items (4 MiB
    of CRLF to a server role) takes minutes under atheris's instrumentation, and a timeout ends
    the run; a core that loops without consuming input is caught by the harness first."""
    corpus = Path(tempfile.mkdtemp(prefix=f"jobwire-fuzz-{run.protocol}-"))
    for raw in run.seeds():
        (corpus / hashlib.sha1(raw).hexdigest()).write_bytes(raw[:max_len])
    args = [sys.argv[0], str(corpus), f"-max_len={max_len}", f"-seed={seed}",
            f"-max_total_time={int(seconds) + 60}", "-timeout=600", "-rss_limit_mb=4096",
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
    parser.add_argument("--max-len", type=int, default=4096,
                        help="largest small input, in bytes (default 4096)")
    parser.add_argument("--large-share", type=float, default=0.2,
                        help="most of the time large inputs may take (default 0.2; 0: none)")
    parser.add_argument("--large-max", type=int, default=LARGE_SIZES[-1],
                        help="largest large input, in bytes (default 4 MiB)")
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

    run = Run(harness, args.protocol, args.minutes * 60, args.artifacts, engine,
              args.large_share, args.large_max)
    if args.replay:
        role, data, context, cuts, bytewise_limit = run.decode(args.replay.read_bytes())
        print(f"{role.name}: {len(data)} bytes, context {len(context)} bytes, "
              f"{len(cuts[0])} chunks")
        outcome = harness.check(role, data, context, cuts, bytewise_limit=bytewise_limit)
        print(f"{len(outcome.events)} events, then {outcome.error}; last: "
              f"{[e[:200] for e in outcome.events[-3:]]}")
        return 0
    print(f"fuzzing {args.protocol} for {args.minutes:g} min with {engine} (seed {seed}, "
          f"roles: {', '.join(r.name for r in run.roles)}; large inputs: "
          f"{args.large_share:.0%} of the time, up to {args.large_max} bytes; {_load()})",
          flush=True)
    if atheris is not None:
        run_atheris(run, atheris, args.max_len, seed, args.minutes * 60)
    else:
        run_random(run, args.max_len, seed)
    return 0  # not reached: Run.one exits at the deadline


if __name__ == "__main__":
    sys.exit(main())
