"""Fresh random job ids, made a batch at a time (the clients' ``add``/``put`` hot path).

``uuid.uuid4()`` reads 16 bytes from ``os.urandom`` per id: a ``getrandom`` system call and a
``UUID`` object on every job added one at a time. :func:`pooled` turns a function that makes
``count`` ids from one ``os.urandom`` call into one that hands them out one by one, making the
next batch when the last one is used up. The ids are the same: the bits come from the same
source, only read more at once.

A forked child process starts with an empty batch (``os.register_at_fork``): it never hands out
an id its parent still holds. Taking an id is one ``deque.popleft``, atomic across threads.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable

__all__ = ["BATCH", "VARIANT", "pooled", "uuid4_hex"]

#: Ids made per ``os.urandom`` call.
BATCH = 64
#: A hex digit of random bits -> the RFC 4122 variant digit (10xx in binary) keeping its low
#: bits.
VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}


def uuid4_hex(count: int) -> list[str]:
    """``count`` random UUIDv4s as 32 lower-case hex digits (``uuid.uuid4().hex``'s form),
    from one ``os.urandom`` call: version nibble 4, variant bits 10, 122 random bits."""
    h = os.urandom(16 * count).hex()
    return [f"{h[i:i + 12]}4{h[i + 13:i + 16]}{VARIANT[h[i + 16]]}{h[i + 17:i + 32]}"
            for i in range(0, 32 * count, 32)]


def pooled(make: Callable[[int], list[str]]) -> Callable[[], str]:
    """A function returning a fresh id of those ``make(BATCH)`` makes, each once."""
    fresh: deque[str] = deque()
    os.register_at_fork(after_in_child=fresh.clear)
    popleft, extend = fresh.popleft, fresh.extend

    def take() -> str:
        while True:
            try:
                return popleft()
            except IndexError:  # used up (by other threads too, while this one made more)
                extend(make(BATCH))

    return take
