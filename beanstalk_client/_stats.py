"""beanstalkd's YAML-ish stats documents, parsed and written without a YAML library.

A YAML library would be wrong here (docs/beanstalkd.md): in 1.12 ``os``, ``hostname`` and tube
names are unquoted, so ``os: #1 SMP`` would read as a comment and a tube named ``1.10``,
``yes`` or ``010`` would become a float, a bool or an octal. The rule instead: every value is a
``str`` with one pair of surrounding double quotes stripped, except under keys known to be
numeric, which become ``int`` (or ``float`` for the rusage times). Unknown keys from newer
servers stay strings.
"""

from __future__ import annotations

from jobwire._numbers import parse_decimal, parse_uint
from jobwire.errors import RemoteProtocolError

# typing is not imported at run time: the bundled server (which needs the keys, not the
# TypedDicts) starts without it, and the TypedDicts are made when first asked for (the
# module's __getattr__, at the end).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final, TypedDict, cast
else:
    from types import SimpleNamespace

    from jobwire._typing import cast

    def TypedDict(name: str, fields: dict[str, type]) -> SimpleNamespace:
        return SimpleNamespace(__annotations__=fields)

__all__ = [
    "JobStats",
    "ServerStats",
    "TubeStats",
    "format_dict",
    "format_list",
    "parse_job_stats",
    "parse_list",
    "parse_server_stats",
    "parse_tube_stats",
]

StatsValue = int | float | str

JobStats = TypedDict(
    "JobStats",
    {
        "id": int, "tube": str, "state": str, "pri": int, "age": int, "delay": int, "ttr": int,
        "time-left": int, "file": int, "reserves": int, "timeouts": int, "releases": int,
        "buries": int, "kicks": int,
    },
)
TubeStats = TypedDict(
    "TubeStats",
    {
        "name": str, "current-jobs-urgent": int, "current-jobs-ready": int,
        "current-jobs-reserved": int, "current-jobs-delayed": int, "current-jobs-buried": int,
        "total-jobs": int, "current-using": int, "current-watching": int, "current-waiting": int,
        "cmd-delete": int, "cmd-pause-tube": int, "pause": int, "pause-time-left": int,
    },
)
ServerStats = TypedDict(
    "ServerStats",
    {
        "current-jobs-urgent": int, "current-jobs-ready": int, "current-jobs-reserved": int,
        "current-jobs-delayed": int, "current-jobs-buried": int, "cmd-put": int, "cmd-peek": int,
        "cmd-peek-ready": int, "cmd-peek-delayed": int, "cmd-peek-buried": int,
        "cmd-reserve": int, "cmd-reserve-with-timeout": int, "cmd-delete": int,
        "cmd-release": int, "cmd-use": int, "cmd-watch": int, "cmd-ignore": int, "cmd-bury": int,
        "cmd-kick": int, "cmd-touch": int, "cmd-stats": int, "cmd-stats-job": int,
        "cmd-stats-tube": int, "cmd-list-tubes": int, "cmd-list-tube-used": int,
        "cmd-list-tubes-watched": int, "cmd-pause-tube": int, "job-timeouts": int,
        "total-jobs": int, "max-job-size": int, "current-tubes": int, "current-connections": int,
        "current-producers": int, "current-workers": int, "current-waiting": int,
        "total-connections": int, "pid": int, "version": str, "rusage-utime": float,
        "rusage-stime": float, "uptime": int, "binlog-oldest-index": int,
        "binlog-current-index": int, "binlog-records-migrated": int,
        "binlog-records-written": int, "binlog-max-size": int, "draining": str, "id": str,
        "hostname": str, "os": str, "platform": str,
    },
)

#: The keys of each document whose values are numbers, in beanstalkd 1.12's order.
JOB_KEYS: Final = tuple(JobStats.__annotations__)
TUBE_KEYS: Final = tuple(TubeStats.__annotations__)
SERVER_KEYS: Final = tuple(ServerStats.__annotations__)
_FLOAT_KEYS: Final = frozenset({"rusage-utime", "rusage-stime"})


def _numeric(keys: dict[str, type]) -> frozenset[str]:
    return frozenset(k for k, t in keys.items() if t in (int, float))


_JOB_NUMERIC = _numeric(JobStats.__annotations__)
_TUBE_NUMERIC = _numeric(TubeStats.__annotations__)
_SERVER_NUMERIC = _numeric(ServerStats.__annotations__)

if not TYPE_CHECKING:
    _FIELDS = {name: globals().pop(name).__annotations__
               for name in ("JobStats", "TubeStats", "ServerStats")}

    def __getattr__(name: str) -> object:
        """``JobStats``, ``TubeStats`` and ``ServerStats``, made (importing typing) on first
        use; the same object each time."""
        if name not in _FIELDS:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from typing import TypedDict

        return globals().setdefault(name, TypedDict(name, _FIELDS[name]))


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return value


def _lines(data: bytes) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError("stats document is not UTF-8") from exc
    lines = text.split("\n")
    if not lines or lines[0] != "---":
        raise RemoteProtocolError(f"stats document does not start with '---': {text[:40]!r}")
    return [line for line in lines[1:] if line]


def parse_dict(data: bytes, numeric: frozenset[str]) -> dict[str, StatsValue]:
    """Parse a ``key: value`` document; values under ``numeric`` keys become numbers.

    Raises:
        RemoteProtocolError: not a ``---`` document of ``key: value`` lines, or a numeric key
            whose value is not a number.
    """
    out: dict[str, StatsValue] = {}
    for line in _lines(data):
        key, sep, value = line.partition(": ")
        if not sep:
            if line.endswith(":"):
                key, value = line[:-1], ""
            else:
                raise RemoteProtocolError(f"stats line without 'key: value': {line[:60]!r}")
        value = _unquote(value)
        if key in numeric:  # strictly: int() would take "+5", " 3", "1_0", 5000 digits
            what = f"stats key {key!r}"
            out[key] = parse_decimal(value, what) if key in _FLOAT_KEYS else parse_uint(value, what)
        else:
            out[key] = value
    return out


def parse_job_stats(data: bytes) -> JobStats:
    """Parse the document of ``stats-job``."""
    return cast("JobStats", parse_dict(data, _JOB_NUMERIC))


def parse_tube_stats(data: bytes) -> TubeStats:
    """Parse the document of ``stats-tube`` (the ``data`` of its ``Ok`` reply); ``name`` stays
    a string whatever it looks like.

    Raises:
        RemoteProtocolError: not a document of ``key: value`` lines, or a numeric key whose
            value is not a number.
    """
    return cast("TubeStats", parse_dict(data, _TUBE_NUMERIC))


def parse_server_stats(data: bytes) -> ServerStats:
    """Parse the document of ``stats``."""
    return cast("ServerStats", parse_dict(data, _SERVER_NUMERIC))


def parse_list(data: bytes) -> list[str]:
    """Parse a ``- item`` list (``list-tubes``, ``list-tubes-watched``); items stay strings.

    Raises:
        RemoteProtocolError: not a ``---`` document of ``- item`` lines.
    """
    items = []
    for line in _lines(data):
        if not line.startswith("- "):
            raise RemoteProtocolError(f"list line without '- ': {line[:60]!r}")
        items.append(_unquote(line[2:]))
    return items


def format_dict(values: dict[str, StatsValue] | JobStats | TubeStats | ServerStats) -> bytes:
    """Write a document as beanstalkd 1.12 does (the bundled server uses this)."""
    out = ["---\n"]
    for key, value in values.items():
        if isinstance(value, float):
            text = f"{value:.6f}"
        elif key == "version":
            text = f'"{value}"'
        else:
            text = str(value)
        out.append(f"{key}: {text}\n")
    return "".join(out).encode()


def format_list(items: list[str]) -> bytes:
    """Write a ``- item`` list as beanstalkd 1.12 does."""
    return ("---\n" + "".join(f"- {item}\n" for item in items)).encode()
