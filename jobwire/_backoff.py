"""Jittered exponential back-off ("full jitter"), with no clock or sleep of its own."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass(slots=True)
class Backoff:
    """Delays for successive retries: uniform in ``[0, min(cap, base * factor**n)]``.

    Call :meth:`next_delay` after each failure and :meth:`reset` after a success. The caller
    sleeps; this class only computes.
    """

    base: float = 0.1
    cap: float = 10.0
    factor: float = 2.0
    attempts: int = 0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        if self.base <= 0 or self.cap < self.base or self.factor < 1:
            raise ValueError("need 0 < base <= cap and factor >= 1")

    def next_delay(self) -> float:
        """Return the delay before the next attempt and count this attempt."""
        try:  # float power, exponent bounded: no huge ints, overflow means "past the cap"
            ceiling = min(self.cap, self.base * float(self.factor) ** min(self.attempts, 4096))
        except OverflowError:
            ceiling = self.cap
        self.attempts += 1
        return self.rng.uniform(0, ceiling)

    def reset(self) -> None:
        """Forget past failures."""
        self.attempts = 0
