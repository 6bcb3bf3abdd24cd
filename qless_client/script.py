"""The qless script's calls as values, for code that sends many different calls pipelined on
one connection, or wants a job as the script describes it (:class:`JobData`) rather than as a
:class:`~qless_client.Job`. ``jobwire.spark``'s sink and stream are such code: a task's ``put``
calls, a batch's ``complete`` and ``heartbeat`` calls go out with :func:`run_many`.

    from qless_client import Client, script
    with Client("redis://127.0.0.1:6379/0") as client:
        calls = [script.put(client.clock(), "emails", jid, "app.SendEmail", "{}")
                 for jid in jids]
        script.run_many(client, calls)

Each builder takes ``now`` (UTC seconds: pass ``client.clock()``) and the command's arguments,
checks them and returns a :class:`ScriptCall`; nothing is sent until :func:`run` or
:func:`run_many`. A builder raises ``TypeError`` for an argument of the wrong type and
:class:`~jobwire.errors.LocalProtocolError` for a bad value (a negative count, a NaN...). The
names the client's own methods check with :func:`validate_name` (queues, classes, jids, tags)
are not checked again by the builders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from ._client_sync import DEFAULT_WINDOW, Client, _name
from ._scripts import (
    BUCKETS,
    JobData,
    ScriptCall,
    complete,
    failed,
    failed_counts,
    get,
    heartbeat,
    jobs,
    multiget,
    peek,
    pop,
    put,
    queue,
    queues,
    recur_get,
    tracked,
)

__all__ = [
    "BUCKETS",
    "JobData",
    "ScriptCall",
    "complete",
    "failed",
    "failed_counts",
    "get",
    "heartbeat",
    "jobs",
    "multiget",
    "peek",
    "pop",
    "put",
    "queue",
    "queues",
    "recur_get",
    "run",
    "run_many",
    "tracked",
    "validate_name",
]

T = TypeVar("T")


def validate_name(value: object, what: str = "name") -> str:
    """Return ``value`` if it is a name the client sends (a queue, a job class, a jid, a tag,
    a worker): a non-empty ``str`` of printable characters without surrounding whitespace.
    ``what`` names the value in the error.

    Raises:
        TypeError: not a ``str``.
        LocalProtocolError: empty, padded, or holding a character that is not printable.
    """
    return _name(value, what)


def run(client: Client[Any], call: ScriptCall[T]) -> T:
    """Send ``call`` (one ``EVALSHA`` of the qless script) on ``client``'s connection, loading
    the script first (once per client; a ``NOSCRIPT`` later reloads it); return its decoded
    reply.

    Raises:
        RedisError: the script refused the call (a :class:`~qless_client.ScriptError`).
        JobwireConnectionError, OperationTimeout: the connection failed or a wait ran out.
        RemoteProtocolError: a reply that is not what the call expects.
    """
    return client._run(call)


def run_many(
    client: Client[Any], calls: Sequence[ScriptCall[T]], window: int = DEFAULT_WINDOW
) -> list[T]:
    """Send ``calls`` pipelined on ``client``'s connection, at most ``window`` unanswered at
    once (the script loaded first, as :func:`run` does); return their decoded replies in order.
    Every reply is read, whatever the script refused.

    Raises:
        BulkError: some calls failed: ``.results`` holds each call's decoded reply or its
            exception (``RedisError`` for a refusal; ``ConnectionLost``, ``NotSent`` ... when
            the connection failed), ``.error`` the first failure.
    """
    return client._run_many(calls, window)
