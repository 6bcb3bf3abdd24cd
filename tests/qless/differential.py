"""A differential harness: the same qless calls against qless-core's script and ours.

qless-core's ``qless.lua`` is the one qless-py 0.11.4 ships (the script every binding's deployment
runs). It is read from the installed package and patched in memory for Redis 7 (its global
``table.extend`` becomes a local function); nothing of it is copied into the project. Our script is
read from ``qless_client/lua/qless.lua`` through importlib.resources (not through
``qless_client._scripts``, so the harness does not depend on the Python client).

Both are called the qless-core way, ``EVALSHA <sha> 0 <command> <now> <args...>``, each in its own
database of one redis-server. After every step a :class:`Pair` compares, between the two sides:

* the reply: strings holding JSON objects or arrays are decoded (cjson writes object keys in no
  fixed order), a job's ``dependents``, ``dependencies`` and ``data`` made canonical (see
  :func:`canonical`), error replies compared on their message (Redis' ``ERR``,
  ``user_script:<line>:`` and ``script: <sha>, on @user_script:<line>.`` wrappers stripped,
  since line numbers and SHAs differ by construction; a Lua table's address printed in a
  message becomes ``<address>``);
* the whole database: every key with its type and content (strings, hashes, lists, sets, zsets
  with their scores, TTLs), JSON values decoded the same way;
* what the step published on ``ql:*`` (a PSUBSCRIBE on a connection of its own), in order.

Fields of later qless-core versions that ours writes and 0.11.4 lacks (:data:`EXTENSION_FIELDS`)
are left out where qless-core's side lacks them. Nothing else is normalised: jids are the
callers' (recurring children are ``<jid>-<n>`` on both sides) and every ``now`` is fixed by the
scenario, so states compare exactly.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import redis

#: The two databases of the shared test server the differential tests use (flushed per test).
THEIR_DB = 14
OUR_DB = 15

#: Redis pub/sub is server-wide, so each side's step ends with a message on this channel (outside
#: ``ql:*``); everything the step published on ``ql:*`` arrives before it.
SENTINEL = "jobwire-differential-sentinel"


def their_source() -> str:
    """qless-core's script as qless-py 0.11.4 ships it, with its one Redis 7 fix applied.

    Redis >= 6.2.7 makes the standard tables read-only, so ``function table.extend(...)`` fails
    with "Attempt to modify a readonly table"; the same function as a local runs unchanged.
    """
    source = resources.files("qless").joinpath("qless-core/qless.lua").read_text()
    patched = source.replace(
        "function table.extend(self, other)", "local function table_extend(self, other)"
    ).replace("table.extend(", "table_extend(")
    assert "table.extend" not in patched and patched.count("table_extend(") == 3
    return patched


def our_source() -> str:
    """jobwire's script, read from the package data."""
    return resources.files("qless_client").joinpath("lua/qless.lua").read_text()


# ------------------------------------------------------------------------------------------
# Steps and scenarios
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One script call: ``command now *args`` on both sides.

    ``theirs`` replaces the call on qless-core's side (for a command qless-core 0.11.4 lacks and
    ours implements as a documented equivalent). ``plain`` makes the step a plain Redis command
    (``command *args``, no script) sent to both databases: it sets up data another writer left
    (an older script, another binding). ``differs`` marks an intended difference with
    the reason; such a step must differ (the suite fails if it stops differing, so the
    documentation stays true) and must be its scenario's last step.
    """

    command: str
    now: float | str  # a string only to test how a bad `now` is refused
    args: tuple[str, ...]
    theirs: tuple[str, tuple[str, ...]] | None = None
    differs: str | None = None
    plain: bool = False

    def call(self, side: str) -> tuple[str, tuple[str, ...]]:
        if side == "theirs" and self.theirs is not None:
            return self.theirs
        return self.command, self.args

    def __str__(self) -> str:
        if self.plain:
            return " ".join(["redis:", self.command, *self.args])
        text = " ".join([self.command, _arg(self.now), *self.args])
        if self.theirs is not None:
            text += f"  (qless-core: {' '.join([self.theirs[0], *self.theirs[1]])})"
        return text


def _arg(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def call(command: str, now: float | str, *args: object, differs: str | None = None,
         theirs: tuple[str, Sequence[object]] | None = None) -> Step:
    """A :class:`Step`; lists and dicts in ``args`` are sent as JSON, numbers as decimals."""
    other = None if theirs is None else (theirs[0], tuple(_arg(a) for a in theirs[1]))
    return Step(command, now, tuple(_arg(a) for a in args), other, differs)


def plain(command: str, *args: object) -> Step:
    """A plain Redis command, the same on both databases (see :class:`Step`)."""
    return Step(command, 0, tuple(_arg(a) for a in args), plain=True)


@dataclass(frozen=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]

    def __post_init__(self) -> None:
        for step in self.steps[:-1]:
            assert step.differs is None, f"{self.name}: an expected difference must end it"


# ------------------------------------------------------------------------------------------
# Observations
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Error:
    """An error reply, by its message."""

    message: str


@dataclass
class Outcome:
    """What one side did in one step."""

    reply: Any
    state: dict[str, Any]
    published: list[tuple[str, Any]] = field(default_factory=list)


_WRAPPERS = [
    re.compile(r"^ERR "),
    re.compile(r"^user_script:\d+: "),
    re.compile(r" script: [0-9a-f]{40}, on @user_script:\d+\.$"),
]


def error_message(text: str) -> str:
    """An error reply's message without the wrappers Redis adds around a script's error."""
    for pattern in _WRAPPERS:
        text = pattern.sub("", text)
    # qless-core prints a Lua table in one message ("Odd number of additional args: table:
    # 0x55d0c8a0"): an address, different on every call.
    return re.sub(r"table: 0x[0-9a-f]+", "table: <address>", text)


def decoded(value: Any) -> Any:
    """A reply or stored value with JSON objects/arrays in strings decoded (recursively)."""
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        if value[:1] in ("{", "["):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value
    if isinstance(value, list):
        return [decoded(v) for v in value]
    return value


def canonical(value: Any) -> Any:
    """A decoded reply with the two representation-only differences taken out, in every job
    description it holds (``get``, ``multiget``, ``peek``, ``pop``, ``track``):

    * ``dependents`` and ``dependencies`` sorted: they are SMEMBERS replies, whose order Redis
      leaves unspecified;
    * ``data`` decoded from its JSON text: qless-core stores the text ``heartbeat``,
      ``complete`` and ``fail`` get re-encoded by cjson (spacing and key order change), ours
      stores it as given (docs/qless.md; the ``data.as-given`` scenario shows the values where
      re-encoding changes them).
    """
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        value = {k: canonical(v) for k, v in value.items()}
        if "jid" in value and "klass" in value:
            for name in ("dependents", "dependencies"):
                if isinstance(value.get(name), list):
                    value[name] = sorted(value[name])
            if isinstance(value.get("data"), str):
                with contextlib.suppress(ValueError):
                    value["data"] = ("json", json.loads(value["data"]))
    return value


def snapshot(conn: redis.Redis) -> dict[str, Any]:
    """Every key of the connection's database: ``{key: (type, content[, ttl])}``."""
    state: dict[str, Any] = {}
    for key in sorted(conn.scan_iter(count=1000)):
        kind: Any = conn.type(key)
        content: Any
        if kind == "string":
            content = decoded(conn.get(key))
        elif kind == "hash":
            content = {k: decoded(v) for k, v in conn.hgetall(key).items()}
        elif kind == "list":
            content = decoded(conn.lrange(key, 0, -1))
        elif kind == "set":
            content = sorted(conn.smembers(key))
        elif kind == "zset":
            scored: Any = conn.zrange(key, 0, -1, withscores=True)
            content = [(m, s) for m, s in scored]
        else:
            content = f"<{kind}>"
        ttl = conn.pttl(key)
        state[key] = (kind, content) if ttl == -1 else (kind, content, "ttl")
    return state


def differences(theirs: Any, ours: Any, path: str = "") -> Iterator[str]:
    """Readable lines, one per place where ``theirs`` and ``ours`` differ."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for k in sorted(set(theirs) | set(ours), key=str):
            here = f"{path}[{k!r}]"
            if k not in ours:
                yield f"{here}: qless-core has {theirs[k]!r}, ours has nothing"
            elif k not in theirs:
                yield f"{here}: ours has {ours[k]!r}, qless-core has nothing"
            else:
                yield from differences(theirs[k], ours[k], here)
    elif (isinstance(theirs, (list, tuple)) and isinstance(ours, (list, tuple))
          and type(theirs) is type(ours) and len(theirs) == len(ours)):
        for i, (a, b) in enumerate(zip(theirs, ours, strict=True)):
            yield from differences(a, b, f"{path}[{i}]")
    elif theirs != ours or type(theirs) is not type(ours):
        yield f"{path or 'value'}: qless-core {theirs!r} != ours {ours!r}"


#: Job fields later qless-core versions write that 0.11.4 does not: ours may write them too.
#: Where qless-core's side lacks one, ours' copy (in a job hash or a job description) is left
#: out of the comparison. Each needs its own test of our value (the field's reason here).
EXTENSION_FIELDS = {
    "spawned_from_jid": "newer qless-core names a recurring run's template in its job hash",
}


def _without_extensions(theirs: Any, ours: Any) -> Any:
    """``ours`` without the :data:`EXTENSION_FIELDS` that ``theirs`` lacks at the same place."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        return {k: _without_extensions(theirs.get(k), v) for k, v in ours.items()
                if k in theirs or k not in EXTENSION_FIELDS}
    if isinstance(theirs, (list, tuple)) and isinstance(ours, (list, tuple)):
        kept = [_without_extensions(a, b) for a, b in zip(theirs, ours, strict=False)]
        return type(ours)(kept + list(ours[len(kept):]))
    return ours


def compare(theirs: Outcome, ours: Outcome) -> list[str]:
    """Every difference between two outcomes of one step (empty when they agree)."""
    return [
        *(f"reply{line[5:] if line.startswith('value') else line}"
          for line in differences(theirs.reply, _without_extensions(theirs.reply, ours.reply))),
        *(f"state{line}"
          for line in differences(theirs.state, _without_extensions(theirs.state, ours.state))),
        *(f"published{line[5:] if line.startswith('value') else line}"
          for line in differences(theirs.published, ours.published)),
    ]


# ------------------------------------------------------------------------------------------
# Two scripts, two databases
# ------------------------------------------------------------------------------------------


class Side:
    """One script in one database."""

    def __init__(self, url: str, db: int, source: str) -> None:
        self.conn = redis.Redis.from_url(url, db=db, decode_responses=True)
        self.conn.flushdb()
        self.sha: str = self.conn.script_load(source)

    def run(self, command: str, now: float | str, args: Sequence[str], plain: bool = False) -> Any:
        try:
            if plain:
                return decoded(self.conn.execute_command(  # type: ignore[no-untyped-call]
                    command, *args))
            return canonical(
                decoded(self.conn.evalsha(self.sha, 0, command, _arg(now), *args)))
        except redis.ResponseError as exc:
            return Error(error_message(str(exc)))

    def close(self) -> None:
        self.conn.close()


class Pair:
    """qless-core's script and ours, each in its own database, and a ``ql:*`` subscriber."""

    def __init__(self, url: str, their_source_text: str | None = None,
                 our_source_text: str | None = None) -> None:
        self.theirs = Side(url, THEIR_DB, their_source_text or their_source())
        self.ours = Side(url, OUR_DB, our_source_text or our_source())
        self._listener = redis.Redis.from_url(url, decode_responses=True)
        self._pubsub = self._listener.pubsub()  # type: ignore[no-untyped-call]
        self._pubsub.psubscribe("ql:*")
        self._pubsub.subscribe(SENTINEL)
        confirmed = 0
        while confirmed < 2:  # both subscriptions are active before the first step
            message = self._pubsub.get_message(timeout=10)
            assert message is not None, "no subscription confirmation from redis-server"
            confirmed += message["type"] in ("psubscribe", "subscribe")
        self._token = uuid.uuid4().hex
        self._marks = 0

    def reset(self) -> None:
        """Empty both databases and forget what other tests published."""
        self.theirs.conn.flushdb()
        self.ours.conn.flushdb()
        self._published(self.theirs)

    def _published(self, side: Side) -> list[tuple[str, Any]]:
        """What was published since the last call (ends with our sentinel)."""
        self._marks += 1
        mark = f"{self._token}:{self._marks}"
        side.conn.publish(SENTINEL, mark)
        seen: list[tuple[str, Any]] = []
        while True:
            message = self._pubsub.get_message(timeout=10)
            assert message is not None, "the sentinel did not come back from redis-server"
            if message["type"] == "message" and message["channel"] == SENTINEL:
                if message["data"] == mark:
                    return seen
            elif message["type"] == "pmessage":
                seen.append((message["channel"], decoded(message["data"])))

    def _observe(self, side: Side, step: Step, command: str, args: Sequence[str]) -> Outcome:
        reply = side.run(command, step.now, args, step.plain)
        published = self._published(side)
        return Outcome(reply, snapshot(side.conn), published)

    def step(self, step: Step) -> tuple[Outcome, Outcome]:
        """Run ``step`` on qless-core's side, then on ours."""
        theirs = self._observe(self.theirs, step, *step.call("theirs"))
        ours = self._observe(self.ours, step, *step.call("ours"))
        return theirs, ours

    def close(self) -> None:
        self._pubsub.close()
        self._listener.close()
        self.theirs.close()
        self.ours.close()


def play(pair: Pair, scenario: Scenario) -> list[str]:
    """Run every step of ``scenario``; return a report of the steps that went wrong: a
    difference not marked as intended, or an intended difference that did not happen."""
    problems: list[str] = []
    for number, step in enumerate(scenario.steps, 1):
        theirs, ours = pair.step(step)
        found = compare(theirs, ours)
        if step.differs is None and found:
            problems.append(_report(scenario, number, step, theirs, ours, found))
            break  # later steps start from different states
        if step.differs is not None and not found:
            problems.append(f"{scenario.name} step {number} `{step}` was marked as an intended "
                            f"difference ({step.differs}) but both scripts agree")
    return problems


def _report(scenario: Scenario, number: int, step: Step, theirs: Outcome, ours: Outcome,
            found: list[str]) -> str:
    lines = [f"{scenario.name} step {number}: `{step}`",
             f"  qless-core replied {theirs.reply!r}", f"  ours replied       {ours.reply!r}"]
    lines += [f"  {line}" for line in found[:40]]
    if len(found) > 40:
        lines.append(f"  ... and {len(found) - 40} more")
    return "\n".join(lines)
