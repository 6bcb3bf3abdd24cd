"""The checks of every fuzz run, shared by the hypothesis tests (``tests/fuzz/test_*_fuzz.py``) and
the long fuzzer (``scripts/fuzz``). Plain Python: no hypothesis, no pytest.

A *role* is one side of one Sans-IO core: the client role of beanstalk, Gearman (binary and admin
text), Workq and RESP, and the server role of beanstalk, Gearman and Workq (there is no RESP server
role: qless talks to a real Redis). :func:`check` feeds one role the same bytes in several
chunkings (one piece, one byte at a time, and the caller's cuts), then receive_data(b"") (EOF), and
asserts:

1. **Only typed failures.** ``next_event()`` returns events of the role's own types, or raises a
   :class:`~jobwire.errors.ProtocolError` subclass; any other exception escapes (and fails the
   test, or is a finding of the long fuzzer). The beanstalk and Workq server roles are documented
   never to raise on client input: for them even a ProtocolError is a failure. After a
   ProtocolError, the next ``next_event()`` must raise one again (the connection is poisoned).
2. **Chunking does not matter.** Every chunking gives the same events (compared by
   :func:`canonical` ``repr``, so a RESP ``nan`` equals itself and sets compare in any order),
   and the same error type after them. One exception: ``ConnectionClosed.partial`` of a close
   the core decides on *before* EOF (beanstalk after BAD_FORMAT, Workq after -CLIENT-ERROR to a
   payload command) says what was buffered at that moment, which depends on the chunking; it is
   not compared.
3. **Memory stays within the caps.** Whenever ``next_event()`` says NEED_DATA, what the core still
   buffers is less than the largest incomplete item its caps allow (a line, a body, a packet), and
   its other state is within its caps (RESP: nesting, aggregate sizes and one reply's total
   values and bytes; Workq: keys and bytes per record, records per reply; Gearman admin: lines
   and bytes per list). Since the check runs after every chunk, a peer that never sends a
   terminator is refused or discarded before the buffer passes cap + one chunk.
4. **No hang.** Draining stops: a core that keeps producing events without consuming input fails.
5. **Parsers above the core.** Documents a client parses further (beanstalk stats YAML, Gearman
   admin lists) go through those parsers too: they return or raise ``RemoteProtocolError``.
6. **Large inputs** (:func:`grow`, :func:`many_cuts`): up to a few MiB built by repeating and
   joining recorded exchanges, one valid item holding a repeated piece (a RESP tree of empty
   aggregates, a beanstalk stats body, a Gearman admin list...), hostile pieces and runs of
   filler, fed to the roles of :data:`LARGE_ROLES` (each core with its *default* caps, which
   only a large input reaches) in one piece and split at random points into many
   ``receive_data`` calls.

Client roles need commands awaiting replies. They come from the *client half* of a corpus pair,
parsed by the same protocol's server role (so a corpus pair replays as the real client sent it),
or, when that yields none, a fixed list that covers every reply kind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import random
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import beanstalk_client._commands as bc
import gearman_client._admin as ga
import gearman_client._packets as gp
import workq_client._commands as wc
from beanstalk_client import _events as be
from beanstalk_client import _stats as bstats
from beanstalk_client._protocol import DEFAULT_MAX_BODY_SIZE as BEANSTALK_DEFAULT_BODY
from beanstalk_client._protocol import Connection as BeanstalkClient
from beanstalk_client._server_protocol import DEFAULT_MAX_JOB_SIZE as BEANSTALK_DEFAULT_JOB
from beanstalk_client._server_protocol import BadRequest as BeanstalkBadRequest
from beanstalk_client._server_protocol import ServerConnection as BeanstalkServer
from gearman_client import _events as ge
from gearman_client._protocol import CLIENT_SENDS
from gearman_client._protocol import Connection as GearmanClient
from gearman_client._server_protocol import AdminLine
from gearman_client._server_protocol import ServerConnection as GearmanServer
from jobwire._events import NEED_DATA
from jobwire.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from qless_client import _resp as resp
from workq_client import _events as we
from workq_client._protocol import MAX_FIELDS as WORKQ_DEFAULT_FIELDS
from workq_client._protocol import MAX_RECORD_SIZE as WORKQ_DEFAULT_RECORD
from workq_client._protocol import Connection as WorkqClient
from workq_client._server_protocol import BadRequest as WorkqBadRequest
from workq_client._server_protocol import ServerConnection as WorkqServer

__all__ = [
    "CORPUS",
    "HOSTILE",
    "LARGE_ROLES",
    "PROTOCOLS",
    "ROLES",
    "Entry",
    "FuzzFailure",
    "INTERESTING",
    "Outcome",
    "Role",
    "bytewise",
    "canonical",
    "check",
    "drive",
    "grow",
    "load_corpus",
    "many_cuts",
    "mutate",
    "random_cuts",
    "resp_inspect",
    "resp_tree",
    "split",
]

PROTOCOLS = ("beanstalk", "gearman", "workq", "resp")
CORPUS = Path(__file__).resolve().parent / "corpus"

# Caps the fuzzed cores are built with: small, so that inputs of a few KiB reach them.
BEANSTALK_MAX_BODY = 4096  # client role: max_body_size
BEANSTALK_MAX_JOB = 1024  # server role: max_job_size (the transcript's beanstalkd ran -z 1024)
GEARMAN_MAX_BODY = 4096
WORKQ_MAX_FIELDS = 32
WORKQ_MAX_RECORD = 4096
RESP_CAPS = {"max_bulk": 4096, "max_line": 1024, "max_depth": 8, "max_array": 64,
             "max_reply_items": 512, "max_reply_bytes": 12288}


class FuzzFailure(AssertionError):
    """A check failed: a property of the core does not hold for this input."""


class Core(Protocol):
    def receive_data(self, data: bytes) -> None: ...
    def next_event(self) -> Any: ...


# -- corpus -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One recorded exchange: what the client sent, what the server sent back."""

    protocol: str
    name: str
    client: bytes
    server: bytes


def load_corpus(protocol: str) -> list[Entry]:
    """The pairs of ``corpus/<protocol>/`` in name order."""
    folder = CORPUS / protocol
    return [
        Entry(protocol, path.stem, path.read_bytes(), path.with_suffix(".server").read_bytes())
        for path in sorted(folder.glob("*.client"))
    ]


# -- chunkings ----------------------------------------------------------------------------------


def split(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    """``data`` cut at ``cuts``; never an empty chunk (``receive_data(b"")`` means EOF)."""
    points = sorted({0, len(data), *(c for c in cuts if 0 < c < len(data))})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def random_cuts(data: bytes, rng: random.Random) -> list[bytes]:
    """A random chunking: up to 16 cuts anywhere."""
    if len(data) < 2:
        return split(data, ())
    return split(data, (rng.randrange(1, len(data)) for _ in range(rng.randrange(1, 17))))


def many_cuts(data: bytes, rng: random.Random, most: int = 4096) -> list[bytes]:
    """A chunking for a large input: 2 to ``most`` chunks (log-uniform), cut anywhere."""
    if len(data) < 2:
        return split(data, ())
    count = min(int(2 ** rng.uniform(1, max(1.0, most.bit_length() - 1))), len(data) - 1)
    return split(data, (rng.randrange(1, len(data)) for _ in range(count)))


#: Bytes that matter to line- and length-framed protocols: line ends, separators, signs, digits,
#: RESP type bytes.
INTERESTING = b"\r\n \t\x00-+:$*%~|>_#,(=!.0159\xff"
_OPS = ("flip", "set", "insert", "delete", "truncate", "repeat", "splice")


def mutate(data: bytes, rng: random.Random, donors: Sequence[bytes] = (),
           max_len: int = 16384) -> bytes:
    """``data`` after one to four mutations: flip a bit, overwrite a byte with an
    :data:`INTERESTING` one, insert random or interesting bytes, delete a run, truncate, repeat a
    slice, or splice in part of a ``donor``. At most ``max_len`` bytes come out."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(_OPS)
        at = rng.randint(0, len(out))
        if op == "flip" and out:
            out[min(at, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif op == "set" and out:
            out[min(at, len(out) - 1)] = rng.choice(INTERESTING)
        elif op == "insert":
            if rng.random() < 0.5:
                out[at:at] = bytes([rng.choice(INTERESTING)])
            else:
                out[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == "delete":
            del out[at : at + rng.randint(1, 16)]
        elif op == "truncate":
            del out[at:]
        elif op == "repeat" and out:
            end = min(len(out), at + rng.randint(1, 64))
            out[at:at] = out[at:end] * rng.randint(1, 8)
        elif op == "splice" and donors:
            donor = rng.choice(donors)
            start = rng.randint(0, len(donor))
            out[at:at] = donor[start : start + rng.randint(1, 256)]
    return bytes(out[:max_len])


# -- driving a core -----------------------------------------------------------------------------


class Outcome(NamedTuple):
    """What a role made of one input: its events (as :func:`canonical` strings) and the error
    that ended it."""

    events: tuple[str, ...]
    error: type[BaseException] | None


@dataclass(frozen=True)
class Role:
    """One side of one core, with the caps it is checked against.

    Attributes:
        name: ``<protocol>-<role>``.
        feeds_on: which half of a corpus pair is its input: ``"server"`` (client roles read what
            the server sent) or ``"client"``.
        make: a fresh core, given the other half (client roles send the commands in it).
        buffered: bytes the core holds and has not returned as events.
        bound: what ``buffered`` must stay below whenever the core says NEED_DATA.
        event_types: what ``next_event()`` may return (besides NEED_DATA).
        may_raise: whether a ProtocolError is allowed at all.
        caps: further memory checks after NEED_DATA (raise FuzzFailure).
        inspect: further checks on each event (raise FuzzFailure or let a bug escape).
    """

    name: str
    feeds_on: str
    make: Callable[[bytes], Core]
    buffered: Callable[[Any], int]
    bound: int
    event_types: tuple[type, ...]
    may_raise: bool = True
    caps: Callable[[Any], None] = lambda core: None
    inspect: Callable[[Any], None] = lambda event: None


def canonical(value: Any) -> str:
    """``repr`` with the members of sets sorted: a set's order can differ between two equal
    sets (a NaN hashes by identity), and NaN is not equal to itself, so events are compared as
    these strings."""
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__}({{{', '.join(sorted(map(canonical, value)))}}})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{canonical(k)}: {canonical(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return f"{type(value).__name__}({', '.join(map(canonical, value))})"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{f.name}={canonical(getattr(value, f.name))}"
                           for f in dataclasses.fields(value))
        return f"{type(value).__qualname__}({fields})"
    return repr(value)


def _normal(event: Any, at_eof: bool) -> str:
    closed_early = not at_eof and hasattr(event, "partial")
    if closed_early and dataclasses.is_dataclass(event) and not isinstance(event, type):
        event = dataclasses.replace(event, partial=None)
    return f"{type(event).__qualname__}:{canonical(event)}"


def _is_closed(event: Any) -> bool:
    return type(event).__name__ == "ConnectionClosed"


def _drain(role: Role, core: Any, events: list[str], at_eof: bool, budget: int) -> bool:
    """Call ``next_event()`` until NEED_DATA; True once the connection reported its closing."""
    for _ in range(budget):
        event = core.next_event()
        if event is NEED_DATA:
            held = role.buffered(core)
            if held >= role.bound:
                raise FuzzFailure(
                    f"{role.name}: {held} bytes buffered at NEED_DATA, cap is {role.bound}"
                )
            role.caps(core)
            return at_eof
        if not isinstance(event, role.event_types):
            raise FuzzFailure(f"{role.name}: next_event() returned {event!r}")
        role.inspect(event)
        events.append(_normal(event, at_eof))
        if _is_closed(event):
            return True
    raise FuzzFailure(f"{role.name}: next_event() gave {budget} events without needing data")


def drive(role: Role, core: Any, chunks: Sequence[bytes]) -> Outcome:
    """Feed ``chunks`` then EOF, draining after each; the events and the error that ended it."""
    events: list[str] = []
    budget = 64 + 4 * sum(map(len, chunks))
    try:
        for chunk in chunks:
            core.receive_data(chunk)
            if _drain(role, core, events, False, budget):
                return Outcome(tuple(events), None)
        core.receive_data(b"")
        _drain(role, core, events, True, budget)
    except ProtocolError as exc:
        if not role.may_raise:
            raise FuzzFailure(f"{role.name} raised {exc!r}; it is documented never to") from exc
        try:
            again = core.next_event()
        except ProtocolError:
            pass
        else:
            raise FuzzFailure(
                f"{role.name}: poisoned by {exc!r}, then next_event() returned {again!r}"
            ) from exc
        return Outcome(tuple(events), type(exc))
    return Outcome(tuple(events), None)


def check(role: Role, data: bytes, context: bytes = b"", cuts: Sequence[Sequence[bytes]] = (),
          *, bytewise_limit: int = 1 << 16) -> Outcome:
    """Run every check on ``data`` fed to ``role`` (commands from ``context`` for client roles):
    in one piece, byte by byte (when ``data`` is at most ``bytewise_limit`` bytes), and in each
    chunking of ``cuts``. Returns the outcome; raises FuzzFailure when chunkings disagree."""
    first = drive(role, role.make(context), split(data, ()))
    chunkings: list[tuple[str, Sequence[bytes]]] = [(f"chunking {i}", c) for i, c in
                                                      enumerate(cuts)]
    if len(data) <= bytewise_limit:
        chunkings.insert(0, ("byte by byte", bytewise(data)))
    for label, chunks in chunkings:
        if b"".join(chunks) != data:
            raise ValueError("a chunking must join to the data")
        other = drive(role, role.make(context), chunks)
        if other != first:
            raise FuzzFailure(
                f"{role.name}: {label} ({len(chunks)} chunks) differs from one piece:\n"
                f"  one piece: {_diff(first, other)}"
            )
    return first


def _diff(a: Outcome, b: Outcome) -> str:
    for i, (x, y) in enumerate(zip(a.events, b.events, strict=False)):
        if x != y:
            return f"event {i}: {x[:300]}\n  other:     event {i}: {y[:300]}"
    if len(a.events) != len(b.events):
        return (f"{len(a.events)} events then {a.error}\n"
                f"  other:     {len(b.events)} events then {b.error}")
    return f"error {a.error}\n  other:     error {b.error}"


# -- beanstalk ----------------------------------------------------------------------------------

#: Commands for a beanstalk client role when the context holds none: every reply word is
#: accepted by at least one of them.
BEANSTALK_DEFAULT: tuple[bc.Command[Any], ...] = (
    bc.Put(b"x"), bc.Use("t"), bc.Reserve(), bc.ReserveWithTimeout(0), bc.ReserveJob(1),
    bc.Delete(1), bc.Release(1), bc.Bury(1), bc.Touch(1), bc.Watch("t"), bc.Ignore("t"),
    bc.Peek(1), bc.PeekReady(), bc.Kick(5), bc.KickJob(1), bc.StatsJob(1), bc.StatsTube("t"),
    bc.Stats(), bc.ListTubes(), bc.ListTubeUsed(), bc.ListTubesWatched(), bc.PauseTube("t", 1),
)


def beanstalk_commands(context: bytes) -> list[bc.Command[Any]]:
    """The commands in ``context`` as beanstalkd would read them (the server role's reading); a
    rejected one stands in as a ``put`` (it accepts every error word)."""
    server = BeanstalkServer(max_job_size=1 << 20)
    server.receive_data(context)
    server.receive_data(b"")
    out: list[bc.Command[Any]] = []
    for _ in range(len(context) + 1):
        event = server.next_event()
        if isinstance(event, bc.Command):
            out.append(event)
        elif isinstance(event, BeanstalkBadRequest):
            out.append(bc.Put(b""))
        else:
            break
    return out


def _beanstalk_client(context: bytes, max_body_size: int = BEANSTALK_MAX_BODY) -> BeanstalkClient:
    core = BeanstalkClient(max_body_size=max_body_size)
    for command in beanstalk_commands(context) or BEANSTALK_DEFAULT * 3:
        try:
            core.send(command)
        except LocalProtocolError:  # after quit
            break
    return core


_STATS_PARSERS = (bstats.parse_server_stats, bstats.parse_job_stats, bstats.parse_tube_stats,
                  bstats.parse_list)


def _beanstalk_inspect(event: Any) -> None:
    if isinstance(event, be.Ok):  # what the client API does with it
        for parse in _STATS_PARSERS:
            with contextlib.suppress(RemoteProtocolError):
                parse(event.data)


BEANSTALK_CLIENT = Role(
    name="beanstalk-client",
    feeds_on="server",
    make=_beanstalk_client,
    buffered=lambda core: len(core._buffer),
    bound=max(bc.MAX_LINE, BEANSTALK_MAX_BODY + 2),
    event_types=(be.Reply, be.ConnectionClosed),
    inspect=_beanstalk_inspect,
)

BEANSTALK_SERVER = Role(
    name="beanstalk-server",
    feeds_on="client",
    make=lambda context: BeanstalkServer(max_job_size=BEANSTALK_MAX_JOB),
    buffered=lambda core: core.buffered,
    bound=max(bc.MAX_LINE, BEANSTALK_MAX_JOB + 2),
    event_types=(bc.Command, BeanstalkBadRequest, be.ConnectionClosed),
    may_raise=False,
)


# -- gearman ------------------------------------------------------------------------------------

GEARMAN_DEFAULT: tuple[gp.Packet, ...] = (
    gp.SubmitJob(b"f", b"", b"x"), gp.GetStatus(b"H:1"), gp.EchoReq(b"e"),
    gp.OptionReq(b"exceptions"), gp.GrabJob(), gp.GrabJobUniq(), gp.GrabJobAll(),
    gp.GetStatusUnique(b"u"), gp.SubmitJobBg(b"f", b"u", b"x"),
)
ADMIN_DEFAULT: tuple[ga.AdminCommand, ...] = (
    ga.Workers(), ga.Status(), ga.Version(), ga.GetPid(), ga.ShowJobs(),
    ga.PriorityStatusCommand(), ga.ShowUniqueJobs(), ga.CancelJob("H:1"), ga.MaxQueue("f"),
)


def admin_command(line: str) -> ga.AdminCommand:
    """The admin command a text line asks for; anything else as ``version`` (one-line reply)."""
    words = line.split()
    fixed: dict[tuple[str, ...], ga.AdminCommand] = {
        ("workers",): ga.Workers(), ("status",): ga.Status(),
        ("prioritystatus",): ga.PriorityStatusCommand(), ("show", "jobs"): ga.ShowJobs(),
        ("show", "unique", "jobs"): ga.ShowUniqueJobs(), ("getpid",): ga.GetPid(),
        ("verbose",): ga.Verbose(), ("version",): ga.Version(), ("shutdown",): ga.Shutdown(),
        ("shutdown", "graceful"): ga.Shutdown(True),
    }
    command = fixed.get(tuple(words))
    if command is not None:
        return command
    if not line.isascii():
        # Names the client could not send anyway (a lone surrogate, a non-UTF-8 byte the
        # server role kept, is refused with LocalProtocolError: test_gearman_fuzz.py): the
        # context is scaffolding, not the fuzz target.
        return ga.Version()
    if len(words) == 3 and words[:2] == ["cancel", "job"]:
        return ga.CancelJob(words[2])
    if len(words) == 3 and words[1] == "function" and words[0] in ("create", "drop"):
        return (ga.CreateFunction if words[0] == "create" else ga.DropFunction)(words[2])
    if words[:1] == ["maxqueue"] and len(words) >= 2:
        return ga.MaxQueue(words[1])
    return ga.Version()


def gearman_requests(context: bytes) -> tuple[list[gp.Packet], list[ga.AdminCommand]]:
    """The packets (only those a client may send) and admin commands in ``context``, as the
    server role reads them."""
    server = GearmanServer(max_body_size=1 << 20)
    server.receive_data(context)
    server.receive_data(b"")
    packets: list[gp.Packet] = []
    admin: list[ga.AdminCommand] = []
    try:
        for _ in range(len(context) + 1):
            event = server.next_event()
            if isinstance(event, AdminLine):
                admin.append(admin_command(event))
            elif isinstance(event, gp.Packet) and type(event) in CLIENT_SENDS:
                packets.append(event)
            elif event is NEED_DATA or isinstance(event, ge.ConnectionClosed):
                break
    except RemoteProtocolError:
        pass
    return packets, admin


def _gearman_client(context: bytes, max_body_size: int = GEARMAN_MAX_BODY) -> GearmanClient:
    core = GearmanClient(max_body_size=max_body_size)
    for packet in gearman_requests(context)[0] or GEARMAN_DEFAULT * 3:
        with contextlib.suppress(LocalProtocolError):  # one a client would refuse to send
            core.send(packet)
    return core


def _admin_client(context: bytes) -> ga.AdminConnection:
    core = ga.AdminConnection()
    for command in gearman_requests(context)[1] or ADMIN_DEFAULT * 3:
        try:
            core.send(command)
        except LocalProtocolError:
            core.send(ga.Version())
    return core


_ADMIN_PARSERS = (ga.parse_workers, ga.parse_status, ga.parse_priority_status, ga.parse_jobs)


def _admin_inspect(event: Any) -> None:
    if isinstance(event, tuple):
        command, reply = event
        if not isinstance(command, ga.AdminCommand) or not isinstance(reply, ga.AdminReply):
            raise FuzzFailure(f"gearman-admin: next_event() returned {event!r}")
        if isinstance(reply, ga.AdminList):
            for parse in _ADMIN_PARSERS:
                with contextlib.suppress(RemoteProtocolError):
                    parse(reply.lines)


GEARMAN_CLIENT = Role(
    name="gearman-client",
    feeds_on="server",
    make=_gearman_client,
    buffered=lambda core: core._decoder.buffered,
    bound=gp.HEADER_SIZE + GEARMAN_MAX_BODY,
    event_types=(gp.Packet, ge.Answer, ge.Unanswered, ge.ConnectionClosed),
)


def _admin_caps(core: Any) -> None:
    if len(core._lines) > core.max_list_lines or core._size > core.max_list_size:
        raise FuzzFailure(
            f"gearman-admin: a list of {len(core._lines)} lines, {core._size} bytes held "
            f"(caps {core.max_list_lines}, {core.max_list_size})"
        )


GEARMAN_ADMIN = Role(
    name="gearman-admin",
    feeds_on="server",
    make=_admin_client,
    buffered=lambda core: len(core._buffer),
    bound=ga.MAX_LINE,
    event_types=(tuple, ge.ConnectionClosed),
    caps=_admin_caps,
    inspect=_admin_inspect,
)

GEARMAN_SERVER = Role(
    name="gearman-server",
    feeds_on="client",
    make=lambda context: GearmanServer(max_body_size=GEARMAN_MAX_BODY),
    buffered=lambda core: core._decoder.buffered,
    bound=max(ga.MAX_LINE, gp.HEADER_SIZE + GEARMAN_MAX_BODY),
    event_types=(gp.Packet, AdminLine, ge.WrongMagic, ge.ConnectionClosed),
)


# -- workq --------------------------------------------------------------------------------------

_UUID = "6ba7b810-9dad-41d1-80b4-00c04fd430c4"
WORKQ_DEFAULT: tuple[wc.Command, ...] = (
    wc.Add("q", b"x", 1000, 60000, job_id=_UUID), wc.Lease(("q",), 10), wc.Result(_UUID, 0),
    wc.Complete(_UUID, b"ok"), wc.Fail(_UUID, b"no"), wc.Delete(_UUID), wc.InspectJob(_UUID),
    wc.InspectJobs("q", 0, 3), wc.InspectScheduledJobs("q", 0, 3), wc.InspectQueue("q"),
    wc.InspectQueues(0, 3), wc.InspectServer(),
)


def workq_commands(context: bytes) -> list[wc.Command]:
    """The commands in ``context`` as the Workq server role reads them; a rejected one stands in
    as a ``complete`` (a payload command, as most rejected ones are)."""
    server = WorkqServer()
    server.receive_data(context)
    server.receive_data(b"")
    out: list[wc.Command] = []
    for _ in range(len(context) + 1):
        event = server.next_event()
        if isinstance(event, wc.Command):
            out.append(event)
        elif isinstance(event, WorkqBadRequest):
            out.append(wc.Complete(_UUID, b""))
        else:
            break
    return out


def _workq_client(context: bytes, max_fields: int = WORKQ_MAX_FIELDS,
                  max_record_size: int = WORKQ_MAX_RECORD) -> WorkqClient:
    core = WorkqClient(max_fields=max_fields, max_record_size=max_record_size)
    for command in workq_commands(context) or WORKQ_DEFAULT * 3:
        core.send(command)
    return core


def _workq_caps(core: Any) -> None:
    if len(core._fields) > core.max_fields or core._record_size > core.max_record_size:
        raise FuzzFailure(
            f"workq-client: a record holds {len(core._fields)} keys, {core._record_size} bytes "
            f"(caps {core.max_fields}, {core.max_record_size})"
        )
    reading = core._step.name in ("RECORD", "FIELD")  # an inspect reply is being read
    if reading and len(core._records) > getattr(core._pending[0], "limit", 1):
        raise FuzzFailure(f"workq-client: {len(core._records)} records for {core._pending[0]}")


WORKQ_CLIENT = Role(
    name="workq-client",
    feeds_on="server",
    make=_workq_client,
    buffered=lambda core: len(core._buffer),
    # A line, or a payload value read with its "payload " prefix and CRLF.
    bound=max(65536, wc.MAX_PAYLOAD + 10),
    event_types=(we.Reply, we.ConnectionClosed),
    caps=_workq_caps,
)

WORKQ_SERVER = Role(
    name="workq-server",
    feeds_on="client",
    make=lambda context: WorkqServer(),
    buffered=lambda core: len(core._buffer),
    bound=max(65536, wc.MAX_PAYLOAD + 2),
    event_types=(wc.Command, WorkqBadRequest, we.ConnectionClosed),
    may_raise=False,
)


# -- RESP ---------------------------------------------------------------------------------------


def resp_command_count(context: bytes) -> int:
    """How many commands ``context`` holds: a RESP request is an array of bulk strings, which
    the client role itself can read as a reply."""
    reader = resp.Connection()
    for _ in range(len(context) // 4 + 1):
        reader.send_encoded(b"")
    reader.receive_data(context)
    count = 0
    try:
        while isinstance(reader.next_event(), resp.Reply):
            count += 1
    except RemoteProtocolError:
        pass
    return count


def _resp_client(context: bytes, caps: dict[str, int] = RESP_CAPS) -> resp.Connection:
    core = resp.Connection(**caps)
    for _ in range(resp_command_count(context) or 64):
        core.send_encoded(b"*1\r\n$4\r\nPING\r\n")
    return core


def _resp_leaves(values: Iterable[Any], limit: int) -> tuple[int, int]:
    """(values, bytes) in ``values`` at every depth, stopping once ``limit`` values are counted:
    each scalar and each *empty* aggregate is one value, each string its length in bytes. A
    lower bound of what the core counts (it counts every announced value, non-empty aggregates
    too, and bytes on the wire), so it never blames a reply the core was right to accept."""
    count = size = 0
    todo = list(values)
    while todo and count <= limit:
        value = todo.pop()
        if isinstance(value, dict) and value:
            todo.extend(value.keys())
            todo.extend(value.values())
        elif isinstance(value, (list, tuple, set, frozenset)) and value:
            todo.extend(value)
        else:
            count += 1
            if isinstance(value, (bytes, str)):
                size += len(value)
    return count, size


def _resp_caps(core: Any) -> None:
    stack = core._stack
    if len(stack) > core.max_depth:
        raise FuzzFailure(f"resp-client: nested {len(stack)} deep, max_depth {core.max_depth}")
    for _kind, due, items in stack:
        if due + len(items) > 2 * core.max_array:
            raise FuzzFailure(f"resp-client: an aggregate of {due + len(items)} values kept")
    # One reply in total (max_reply_items, max_reply_bytes): what the unfinished reply holds.
    # Counted here when the cap is small (the fuzz caps); with the default caps (a million
    # values) a count at every NEED_DATA would dominate the run, and the whole reply is
    # counted once it is complete (resp_inspect).
    items_cap, bytes_cap = core.max_reply_items, core.max_reply_bytes
    if stack and items_cap <= 1 << 16:
        count, size = _resp_leaves((v for frame in stack for v in frame[2]), items_cap)
        _resp_totals(count, size, items_cap, bytes_cap, "an unfinished reply")


def _resp_totals(count: int, size: int, items_cap: int, bytes_cap: int, what: str) -> None:
    if count > items_cap:
        raise FuzzFailure(f"resp-client: {what} holds over {count - 1} values, "
                          f"max_reply_items {items_cap}")
    if size > bytes_cap:
        raise FuzzFailure(f"resp-client: {what} holds {size} bytes, max_reply_bytes {bytes_cap}")


def resp_inspect(items_cap: int, bytes_cap: int) -> Callable[[Any], None]:
    """The check of every complete RESP value against the reply caps the core was built with."""

    def inspect(event: Any) -> None:
        if isinstance(event, (resp.Reply, resp.Push, resp.Attribute)):
            value = event.data if isinstance(event, resp.Push) else event.value
            count, size = _resp_leaves([value], items_cap)
            _resp_totals(count, size, items_cap, bytes_cap, f"a {type(event).__name__}")

    return inspect


RESP_CLIENT = Role(
    name="resp-client",
    feeds_on="server",
    make=_resp_client,
    buffered=lambda core: len(core._buffer),
    bound=max(RESP_CAPS["max_line"], RESP_CAPS["max_bulk"] + 2),
    event_types=(resp.Event,),
    caps=_resp_caps,
    inspect=resp_inspect(RESP_CAPS["max_reply_items"], RESP_CAPS["max_reply_bytes"]),
)


#: Every role by protocol.
ROLES: dict[str, tuple[Role, ...]] = {
    "beanstalk": (BEANSTALK_CLIENT, BEANSTALK_SERVER),
    "gearman": (GEARMAN_CLIENT, GEARMAN_ADMIN, GEARMAN_SERVER),
    "workq": (WORKQ_CLIENT, WORKQ_SERVER),
    "resp": (RESP_CLIENT,),
}


def role_input(role: Role, entry: Entry) -> tuple[bytes, bytes]:
    """(data, context) of a corpus pair for ``role``: the half it reads, and the other half."""
    if role.feeds_on == "server":
        return entry.server, entry.client
    return entry.client, b""


# -- large inputs -------------------------------------------------------------------------------

#: Every role again, its core built with the *default* caps, as the clients and the bundled
#: servers build it: a large input (:func:`grow`) is fed to these, since only a large input
#: reaches a default cap (beanstalk's 65,535-byte job, Workq's 1 MiB payload and 256 keys per
#: record, Gearman's million-line admin list, RESP's 64 KiB line and million-value reply).
LARGE_ROLES: dict[str, tuple[Role, ...]] = {
    "beanstalk": (
        dataclasses.replace(
            BEANSTALK_CLIENT, name="beanstalk-client-defaults",
            make=functools.partial(_beanstalk_client, max_body_size=BEANSTALK_DEFAULT_BODY),
            bound=max(bc.MAX_LINE, BEANSTALK_DEFAULT_BODY + 2)),
        dataclasses.replace(
            BEANSTALK_SERVER, name="beanstalk-server-defaults",
            make=lambda context: BeanstalkServer(),
            bound=max(bc.MAX_LINE, BEANSTALK_DEFAULT_JOB + 2)),
    ),
    "gearman": (
        dataclasses.replace(
            GEARMAN_CLIENT, name="gearman-client-defaults",
            make=functools.partial(_gearman_client, max_body_size=gp.DEFAULT_MAX_BODY_SIZE),
            bound=gp.HEADER_SIZE + gp.DEFAULT_MAX_BODY_SIZE),
        dataclasses.replace(GEARMAN_ADMIN, name="gearman-admin-defaults"),
        dataclasses.replace(
            GEARMAN_SERVER, name="gearman-server-defaults",
            make=lambda context: GearmanServer(),
            bound=max(ga.MAX_LINE, gp.HEADER_SIZE + gp.DEFAULT_MAX_BODY_SIZE)),
    ),
    "workq": (
        dataclasses.replace(
            WORKQ_CLIENT, name="workq-client-defaults",
            make=functools.partial(_workq_client, max_fields=WORKQ_DEFAULT_FIELDS,
                                   max_record_size=WORKQ_DEFAULT_RECORD)),
        dataclasses.replace(WORKQ_SERVER, name="workq-server-defaults"),
    ),
    "resp": (
        dataclasses.replace(
            RESP_CLIENT, name="resp-client-defaults",
            make=functools.partial(_resp_client, caps={}),
            bound=max(resp.DEFAULT_MAX_LINE, resp.DEFAULT_MAX_BULK + 2),
            inspect=resp_inspect(resp.DEFAULT_MAX_REPLY_ITEMS, resp.DEFAULT_MAX_REPLY_BYTES)),
    ),
}

#: Pieces that probe framing and caps once repeated: lines that never end, lone CR and LF,
#: headers announcing the most a default cap allows (or one more), empty and nested aggregates.
HOSTILE: dict[str, tuple[bytes, ...]] = {
    "beanstalk": (
        b"x", b"\r", b"\n", b"\r\n", b" ", b"RESERVED 1 65535\r\n", b"OK 65536\r\n",
        b"FOUND 1 0\r\n\r\n", b"INSERTED 1\r\n", b"- x\n", b"a: 1\n", b"---\n",
        b"put 0 0 1 65535\r\n", b"put 0 0 1 65536\r\n", b"reserve\r\n", b"use " + b"t" * 200,
    ),
    "gearman": (
        b"\x00", b"\x00RES", b"\x00REQ", b"\n", b"x", b".\n", b"f\t1\t1\t1\n",
        b"\x00RES" + struct.pack(">II", 17, 1 << 20), b"\x00RES" + struct.pack(">II", 6, 0),
        b"\x00REQ" + struct.pack(">II", 16, 1 << 20), b"\x00REQ" + struct.pack(">II", 9, 0),
        b"\x00REQ" + struct.pack(">II", 1, 1) + b"f", b"status\n", b"workers\n",
    ),
    "workq": (
        b"x", b"\r", b"\n", b"\r\n", b"+OK\r\n", b"+OK 100\r\n", b"k v\r\n",
        b"payload-size 1048576\r\n", b"payload ", b"-CLIENT-ERROR x\r\n",
        b"add 6ba7b810-9dad-41d1-80b4-00c04fd430c4 q 1000 60000 1048576\r\n",
        b"complete 6ba7b810-9dad-41d1-80b4-00c04fd430c4 1048577\r\n", b"inspect server\r\n",
    ),
    "resp": (
        b"x", b"\r", b"\n", b"\r\n", b"+", b"*1\r\n", b"*1024\r\n", b"~0\r\n", b"*0\r\n",
        b"%0\r\n", b"%1\r\n", b"_\r\n", b":1\r\n", b"$0\r\n\r\n", b"$65536\r\n", b">2\r\n",
        b"|1\r\n", b"*16777216\r\n", b"(" + b"9" * 100, b"+OK\r\n",
    ),
}

#: Pieces repeated inside one valid item (:func:`_frame`).
_INNER: dict[str, tuple[bytes, ...]] = {
    "beanstalk-client": (b"- x\n", b"a: 1\n", b"---\n", b"x", b"\r\n"),
    "beanstalk-server": (b"x", b"\r\n", b"put 0 0 1 1\r\n"),
    "gearman-client": (b"x", b"\x00"),
    "gearman-admin": (b"f\t1\t1\t1\n", b"x\n", b"30 127.0.0.1 - : f g\n", b"\t\n"),
    "gearman-server": (b"x", b"\x00"),
    "workq-client": (b"k v\r\n", b"ready-len 2\r\n", b"x"),
    "workq-server": (b"x", b"\r\n"),
    "resp-client": (b"~0\r\n", b"*0\r\n", b"%0\r\n", b"_\r\n", b":1\r\n", b"$0\r\n\r\n",
                    b"+x\r\n", b"$1\r\nx\r\n"),
}

_UUID_B = _UUID.encode()
_PING = b"*1\r\n$4\r\nPING\r\n"


def resp_tree(leaf: bytes, width: int, depth: int, kind: bytes = b"*") -> bytes:
    """One RESP value: ``depth`` levels of aggregates of ``width`` elements (``kind``: ``*``
    array, ``~`` set, ``>`` push), ``leaf`` at the bottom: ``width ** depth`` leaves."""
    node = leaf
    for _ in range(depth):
        node = kind + b"%d\r\n" % width + node * width
    return node


def _frame(role: Role, inner: bytes, room: int, rng: random.Random) -> tuple[bytes, bytes]:
    """One valid item of about ``room`` bytes holding ``inner`` repeated: (data, context)."""
    body = inner * max(1, room // max(1, len(inner)))
    name = role.name.removesuffix("-defaults")
    if name == "beanstalk-client":
        return b"OK %d\r\n%b\r\n" % (len(body), body), b"stats\r\n"
    if name == "beanstalk-server":
        return b"put 0 0 1 %d\r\n%b\r\n" % (len(body), body), b""
    if name == "gearman-client":
        return (b"\x00RES" + struct.pack(">II", 17, len(body)) + body,
                b"\x00REQ" + struct.pack(">II", 16, 1) + b"e")
    if name == "gearman-admin":
        return body + b".\n", b"status\n"
    if name == "gearman-server":
        body = b"f\x00\x00" + body
        return b"\x00REQ" + struct.pack(">II", 7, len(body)) + body, b""
    if name == "workq-client":
        return b"+OK 1\r\nserver %d\r\n%b" % (len(body) // len(inner), body), b"inspect server\r\n"
    if name == "workq-server":
        return b"add %b q 1000 60000 %d\r\n%b\r\n" % (_UUID_B, len(body), body), b""
    if name == "resp-client":  # one reply holding leaves at every depth: width ** depth
        depth = rng.randint(1, 4)
        width = max(1, int((room / len(inner)) ** (1 / depth)))
        return resp_tree(inner, width, depth, rng.choice((b"*", b"*", b"~", b">"))), _PING
    raise ValueError(f"no frame for {role.name}")


def _count(rng: random.Random, room: int, length: int) -> int:
    """How many times to repeat a piece of ``length`` bytes: a few, or up to filling ``room``."""
    if rng.random() < 0.4:
        return rng.randint(1, 8)
    return rng.randint(1, max(1, room // max(1, length)))


def grow(role: Role, material: bytes, rng: random.Random, size: int) -> tuple[bytes, bytes]:
    """A large input for ``role``, about ``size`` bytes, and its context (for a client role:
    the commands its valid pieces answer). Up to 64 runs, each one of:

    * a recorded exchange (corpus pair), repeated (its commands repeated in the context);
    * one valid item holding a repeated piece (:func:`_frame`: a RESP tree of empty
      aggregates or scalars, a beanstalk ``OK`` body or ``put`` job, a Gearman ECHO or
      SUBMIT_JOB packet or admin list, a Workq record or ``add`` payload), sized to the room
      left;
    * a :data:`HOSTILE` piece, ``material`` (the fuzzer's own bytes), a mutated corpus half,
      or one byte, repeated.
    """
    protocol = role.name.split("-", 1)[0]
    entries = load_corpus(protocol)
    donors = [role_input(role, e)[0] for e in entries]
    inner = _INNER[role.name.removesuffix("-defaults")]
    keep_context = role.feeds_on == "server"
    # Mostly every valid run comes first and the rest after them: a large valid prefix
    # (a core holding state from thousands of items) and then what probes it.
    valid_first = rng.random() < 0.6
    runs: list[tuple[bool, bytes, bytes]] = []  # (valid, data, context)
    total = 0
    for _ in range(64):
        room = size - total
        if room <= 0:
            break
        pick = rng.random()
        ctx = b""
        if pick < 0.3:
            piece, ctx = role_input(role, rng.choice(entries))
            count = _count(rng, room, len(piece))
            piece, ctx = piece * count, ctx * count
        elif pick < 0.5:
            fill = material[:64] if material and rng.random() < 0.2 else rng.choice(inner)
            piece, ctx = _frame(role, fill, rng.randint(1, room), rng)
        else:
            if pick < 0.7:
                piece = rng.choice(HOSTILE[protocol])
            elif pick < 0.8:
                piece = material or b"x"
            elif pick < 0.9:
                piece = mutate(rng.choice(donors), rng, donors)
            else:
                piece = bytes([rng.choice(INTERESTING + b"x")])
            piece *= _count(rng, room, len(piece) or 1)
        runs.append((pick < 0.5, piece, ctx if keep_context else b""))
        total += len(piece)
    if valid_first:
        runs.sort(key=lambda run: not run[0])  # stable: the order within each kind is kept
    return b"".join(run[1] for run in runs), b"".join(run[2] for run in runs)
