"""A request sent and awaiting its reply: the hand-over point between a session and a caller.

A protocol's session creates one per request and completes it (:meth:`Pending.resolve` or
:meth:`Pending.reject`) when the reply arrives or the connection dies; the transport that moves
the bytes waits on it (:mod:`jobwire._transport`). No I/O here.

A caller that gives up (cancelled, or its own timeout ran out) *abandons* its Pending instead of
removing it: the reply still arrives in its place and is dropped, so it can never reach the next
caller (redis-py #2624). The session decides what an abandoned reply needs (a beanstalk job
reserved for nobody is given back, for instance).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from ._typing import mypyc_attr
from .errors import JobwireError

__all__ = ["Pending"]

R = TypeVar("R", covariant=True)


@mypyc_attr(allow_interpreted_subclasses=True)
class Pending(Generic[R]):
    """A request awaiting its reply.

    Args:
        name: what was asked (a command name), for error messages.
    """

    __slots__ = ("abandoned", "done", "error", "name", "reply", "then", "waker")

    def __init__(self, name: str) -> None:
        self.name = name
        self.reply: R | None = None
        self.error: JobwireError | None = None
        self.done = False
        #: The caller went away; the reply will be dropped when it arrives.
        self.abandoned = False
        #: Set by a transport while a task waits: called once the Pending is done.
        self.waker: Callable[[], None] | None = None
        #: A follow-up run on completion, before the waiting task wakes (in the reading task).
        self.then: Callable[[Pending[R]], None] | None = None

    def result(self) -> R:
        """The reply, or raise the error the request ended with."""
        if self.error is not None:
            raise self.error
        if not self.done:
            raise RuntimeError(f"{self.name}: result() before the reply arrived")
        return self.reply  # type: ignore[return-value]

    def resolve(self, reply: R) -> None:  # type: ignore[misc]  # written once, by the session
        """Complete with ``reply``; run ``then``, wake the waiter."""
        self.reply = reply
        self.done = True
        if self.then is not None:
            self.then(self)
        if self.waker is not None:
            self.waker()

    def reject(self, error: JobwireError) -> None:
        """Complete with ``error`` (raised by :meth:`result`); run ``then``, wake the waiter."""
        self.error = error
        self.done = True
        if self.then is not None:
            self.then(self)
        if self.waker is not None:
            self.waker()
