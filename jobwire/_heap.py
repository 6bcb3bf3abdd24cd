"""Garbage collection for a bundled server's process, which may hold millions of live objects.

CPython's collector scans every tracked object in a full (generation 2) collection, and it
runs one whenever the long-lived objects have grown by a quarter. A server flooded with puts
stores hundreds of thousands of jobs in seconds, so it stopped for 50-150 ms at a time, every
client waiting (issue 19: the flooded beanstalk server's probe answered in 84 ms, 4 ms with
the collector off). The stored jobs die by reference counting (the servers' states hold no
cycles), so a full collection has little to find among them.

:func:`freeze_survivors` makes the process move whatever survives a generation-1 collection
into the permanent generation (:func:`gc.freeze`), so that full collections scan only what
is new. Cycles among old objects that die later are not lost: a thread gives the collector
the whole heap back (:func:`gc.unfreeze`, a full collection, :func:`gc.freeze`) once the
process has been quiet for a while (no more than :data:`QUIET_COLLECTIONS` young collections
in :data:`QUIET_SECONDS`, so nobody is waiting on it), or every :data:`RECLAIM_EVERY`
seconds under constant load, and only when the frozen objects grew by :data:`RECLAIM_GROWTH`
since the last time.

Only a server's own process does this (its ``__main__``): the collector's state belongs to
the process, and a server run inside an application or a test (``serve()``) leaves it alone.
"""

from __future__ import annotations

import _thread
import gc
import time

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import Final

__all__ = ["QUIET_COLLECTIONS", "QUIET_SECONDS", "RECLAIM_EVERY", "RECLAIM_GROWTH",
           "Reclaimer", "freeze_survivors"]

#: How long the process must be quiet before its frozen objects are collected again.
QUIET_SECONDS: Final = 1.0
#: Young collections at most in ``QUIET_SECONDS`` that still count as quiet (each is about
#: 700 objects allocated and kept).
QUIET_COLLECTIONS: Final = 2
#: Seconds after which a reclaim happens even under constant load.
RECLAIM_EVERY: Final = 600.0
#: Frozen objects added since the last reclaim before another is worth its pause.
RECLAIM_GROWTH: Final = 10_000


class Reclaimer:
    """The collector policy of :func:`freeze_survivors` (one per process); :meth:`tick` is
    what its thread runs every ``QUIET_SECONDS``."""

    def __init__(self) -> None:
        self.young = 0  #: young collections seen (the gc callback counts them)
        self.reclaims = 0  #: full collections given back to the collector
        self._young_at_tick = 0
        self._frozen_at_reclaim = 0
        self._reclaimed_at = time.monotonic()

    def on_collection(self, phase: str, info: dict[str, int]) -> None:
        """``gc.callbacks`` entry: counts collections; freezes after a generation-1 one."""
        if phase != "stop":
            return
        self.young += 1
        if info["generation"] >= 1:
            gc.freeze()

    def tick(self, now: float) -> bool:
        """Reclaim when due (see the module's docstring); True when it did."""
        quiet = self.young - self._young_at_tick <= QUIET_COLLECTIONS
        self._young_at_tick = self.young
        grown = gc.get_freeze_count() - self._frozen_at_reclaim >= RECLAIM_GROWTH
        if not grown or not (quiet or now - self._reclaimed_at >= RECLAIM_EVERY):
            return False
        self.reclaim(now)
        return True

    def reclaim(self, now: float) -> None:
        """Collect the whole heap once, frozen objects included, then freeze what lives."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self._frozen_at_reclaim = gc.get_freeze_count()
        self._young_at_tick = self.young
        self._reclaimed_at = now
        self.reclaims += 1


def freeze_survivors() -> Reclaimer:
    """Install the policy in this process (once): the gc callback and the reclaiming thread
    (a daemon, of ``_thread``). Returns the policy, for tests."""
    reclaimer = Reclaimer()
    gc.callbacks.append(reclaimer.on_collection)

    def run() -> None:
        while True:
            time.sleep(QUIET_SECONDS)
            reclaimer.tick(time.monotonic())

    # A bare thread (daemonic: never joined at exit): ``threading`` would add about 2 ms to
    # the server's start, before its first reply.
    _thread.start_new_thread(run, ())
    return reclaimer
