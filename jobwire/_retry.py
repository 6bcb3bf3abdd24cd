"""One retry policy for every worker: which failures are tried again, after what back-off, and
when the worker gives up on a job."""

from __future__ import annotations

import math
from dataclasses import dataclass

from jobwire.errors import LocalProtocolError

__all__ = ["RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """What a worker does with a job whose handler raised: try it again after a back-off, or
    give up on it.

    A failure that is an instance of one of ``retry_on`` is retried ``delay(attempt)`` seconds
    later, ``attempt`` counting the job's tries (1 for the first): ``base_delay``, twice that
    at the second try, and so on up to ``max_delay``. The worker gives up on the job instead
    when the failure is not one of ``retry_on``, or when the job has had ``max_attempts``
    tries (``None``: the worker never gives up on its own; a limit the server keeps, such as
    a qless job's ``retries``, still applies).

    What "retry" and "give up" send is the protocol's: beanstalk ``release``\\ s the job with
    the delay, or ``bury``\\ s it (the count of tries is the job's ``reserves``); qless sends
    ``retry`` with the delay, or ``fail``. Each worker module exports this class as
    ``RetryPolicy``; beanstalk's is a subclass whose delays are whole seconds (the wire's) and
    whose ``max_attempts`` defaults to 5.

    Raises:
        TypeError: ``retry_on`` is not a tuple of exception types; a delay that is not a
            number; ``max_attempts`` that is not an int or None.
        LocalProtocolError: a delay that is negative or not finite; ``max_attempts`` below 1.
    """

    retry_on: tuple[type[BaseException], ...] = (Exception,)
    base_delay: float = 1.0
    max_delay: float = 60.0
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.retry_on, tuple) or not all(
            isinstance(t, type) and issubclass(t, BaseException) for t in self.retry_on
        ):
            raise TypeError(f"retry_on is a tuple of exception types, not {self.retry_on!r}")
        for name in ("base_delay", "max_delay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} is a number of seconds, not {value!r}")
            if not math.isfinite(value) or value < 0:
                raise LocalProtocolError(f"{name} must be a finite number of seconds >= 0, "
                                         f"not {value!r}")
        attempts = self.max_attempts
        if attempts is not None:
            if isinstance(attempts, bool) or not isinstance(attempts, int):
                raise TypeError(f"max_attempts is an int or None, not {attempts!r}")
            if attempts < 1:
                raise LocalProtocolError(f"max_attempts must be >= 1 (or None: never give up), "
                                         f"not {attempts}")

    def retries(self, error: BaseException, attempt: int) -> bool:
        """Whether a job whose ``attempt``-th try raised ``error`` is tried again (rather
        than given up)."""
        if self.max_attempts is not None and attempt >= self.max_attempts:
            return False
        return isinstance(error, self.retry_on)

    def delay(self, attempt: int) -> float:
        """Seconds before the job runs again after its ``attempt``-th try raised."""
        try:
            return float(min(self.max_delay, self.base_delay * 2.0 ** max(attempt - 1, 0)))
        except OverflowError:
            return float(self.max_delay)
