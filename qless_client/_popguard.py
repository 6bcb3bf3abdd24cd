"""Pops that a cancelled caller cannot strand: ``AsyncPopGuard`` (and ``PopGuard``, its sync twin).

The problem: ``pop`` locks jobs in Redis for this worker. If the task waiting for the reply is
cancelled, the transport drops the reply when it arrives, and the jobs it locked stay locked to
nobody until their lock runs out (``heartbeat-<queue>``, 60 s by default); the pop that then
finds them counts a retry for each, and fails a job that had none left.

What the guard does instead: the pop itself always runs to its reply, and if its caller was
cancelled meanwhile, every job it locked is handed back at once with ``retry`` (delay 0). That is
exactly what the expired lock would have led to (one retry used; a job with none left fails in
``failed-retries-<queue>``), without the wait. ``retry`` checks the lock, so a job someone else
took in between is never touched. The caller's cancellation is then raised as usual.

* anyio scopes (``move_on_after``, ``fail_after``, task-group cancels; trio's only kind): the
  pop waits in a shielded scope; a cancel that arrived meanwhile is noticed at the next
  checkpoint, after the reply, and the jobs go back (shielded) before it propagates.
* asyncio's own cancellation (``Task.cancel()``, ``asyncio.wait_for``, ``asyncio.timeout``)
  goes through anyio's shields, so on asyncio the pop runs in a task of its own behind
  ``asyncio.shield``: the caller leaves at once, and the pop's task hands its jobs back when
  the reply arrives (a background task, kept referenced until done).

What no guard can do: a pop whose *reply* never comes (``OperationTimeout``, the connection
lost) may or may not have run; its jobs, if any, come back when their lock runs out.

The sync ``PopGuard`` just sends the pop: a blocking call has no cancellation to guard
against. The names follow ``scripts/unasync.py`` (``AsyncPopGuard`` becomes ``PopGuard``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from jobwire.errors import JobwireError

from . import _scripts as sc
from .errors import BulkError

if TYPE_CHECKING:
    from ._client_async import AsyncClient
    from ._client_sync import Client

__all__ = ["AsyncPopGuard", "PopGuard", "give_back"]

log = logging.getLogger("qless_client")
#: Background hand-backs in progress (asyncio keeps only weak references to tasks).
_HANDING_BACK: set[asyncio.Task[None]] = set()
#: How long a hand-back may take before the jobs are left to their locks.
GIVE_BACK_TIMEOUT = 10.0


async def give_back(client: AsyncClient, jobs: Sequence[Mapping[str, Any]]) -> int:
    """Send ``retry`` (delay 0), pipelined, for each of ``jobs`` (popped by ``client``'s
    worker): they go back to their queue at once, each using one retry. Never raises for a
    refusal or a lost connection (it is logged; the locks then run out as usual).

    Returns:
        How many were handed back (a job whose retries ran out is failed by the script and
        counts too).
    """
    if not jobs:
        return 0
    calls = [sc.retry(client.clock(), job["jid"], job["queue"], job["worker"]) for job in jobs]
    try:
        await client._run_many(calls, len(calls))
    except BulkError as exc:
        log.warning("handing back %d popped job(s): %d refused or unsent (%s); the rest went back",
                    len(jobs), len(jobs) - len(exc.done), exc.error)
        return len(exc.done)
    except JobwireError as exc:
        log.warning("handing back %d popped job(s) failed (%s); they come back when their lock "
                    "runs out", len(jobs), exc)
        return 0
    log.info("handed back %d job(s) whose pop was cancelled", len(jobs))
    return len(jobs)


async def _hand_back_later(client: AsyncClient, jobs: list[sc.JobData]) -> None:
    with anyio.move_on_after(GIVE_BACK_TIMEOUT):
        await give_back(client, jobs)


def _after_cancelled_pop(client: AsyncClient, task: asyncio.Task[list[sc.JobData]]) -> None:
    """Done-callback of a pop whose caller left (asyncio): hand back what it locked."""
    if task.cancelled() or task.exception() is not None:
        return  # nothing was locked, or no one can know (the reply never came)
    jobs = task.result()
    if jobs:
        background = asyncio.ensure_future(_hand_back_later(client, jobs))
        _HANDING_BACK.add(background)
        background.add_done_callback(_HANDING_BACK.discard)


class AsyncPopGuard:
    """Runs ``pop`` calls so that a cancelled caller's jobs go back at once (see the module)."""

    @staticmethod
    async def pop(
        client: AsyncClient, call: sc.ScriptCall[list[sc.JobData]]
    ) -> list[sc.JobData]:
        """Send the ``pop`` ``call`` on ``client`` and return its jobs; if the caller is
        cancelled before they reach it, hand them back (``retry``) and raise the cancellation.

        Raises:
            whatever ``client._run`` raises for the pop itself.
        """
        if asyncio._get_running_loop() is not None:
            task = asyncio.ensure_future(client._run(call))
            try:
                return await asyncio.shield(task)
            except BaseException:
                task.add_done_callback(lambda t: _after_cancelled_pop(client, t))
                raise
        with anyio.CancelScope(shield=True):
            jobs = await client._run(call)
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            with anyio.move_on_after(GIVE_BACK_TIMEOUT, shield=True):
                await give_back(client, jobs)
            raise
        return jobs


class PopGuard:
    """The sync twin of :class:`AsyncPopGuard`: a blocking pop cannot be cancelled."""

    @staticmethod
    def pop(client: Client, call: sc.ScriptCall[list[sc.JobData]]) -> list[sc.JobData]:
        """Send the ``pop`` ``call`` on ``client`` and return its jobs."""
        return client._run(call)
