"""Error base classes shared by every protocol in jobwire.

The tree::

    JobwireError
    ├── ProtocolError                 the byte stream broke a rule; the connection is unusable
    │   ├── LocalProtocolError        we (the caller) misused the API or gave invalid input
    │   │   └── InvalidAddress        a server address that no accepted form matches
    │   └── RemoteProtocolError       the peer sent something the protocol does not allow
    ├── JobwireConnectionError        (also a builtin ConnectionError)
    │   ├── ConnectFailed             could not connect at all
    │   │   └── TLSError              the TLS handshake or the server's certificate was refused
    │   └── ConnectionLost            the peer went away, possibly mid-reply
    ├── OperationTimeout              (also a builtin TimeoutError) a caller's timeout ran out
    │   └── PoolTimeout               no pooled client was free in time (nothing was sent)
    ├── BulkError                     a bulk call (put_many, add_many, ...) failed for some items
    └── NotSent                       an item of a bulk call that was never sent

Each protocol package adds its own reply errors (``BeanstalkError`` ...) under ``JobwireError``,
and its own ``BulkError`` that is both this one and the protocol's base error.
Server replies such as NOT_FOUND or TIMED_OUT are *results*, typed per protocol, never protocol
errors.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BulkError",
    "ConnectFailed",
    "ConnectionLost",
    "JobwireConnectionError",
    "InvalidAddress",
    "JobwireError",
    "LocalProtocolError",
    "NotSent",
    "OperationTimeout",
    "PoolTimeout",
    "ProtocolError",
    "RemoteProtocolError",
    "TLSError",
]


class JobwireError(Exception):
    """Base class of every error jobwire raises on purpose."""


class ProtocolError(JobwireError):
    """The conversation broke a protocol rule. A connection that raised one is poisoned."""


class LocalProtocolError(ProtocolError, ValueError):
    """The caller asked for something the protocol cannot carry (bad name, bad number, misuse).

    Raised before anything is written, so nothing reached the wire; it is also a ``ValueError``.
    """


class InvalidAddress(LocalProtocolError):
    """A server address that is not one of the accepted forms (see ``jobwire._url``); raised
    when the client, worker or admin object is built. Also a ``ValueError``.

    Its message never shows a credential: a URL's password and ``password=``-like query values
    are written ``***`` (``jobwire._url.redact``), whatever the code raising it wrote."""

    def __init__(self, *args: object) -> None:
        from ._url import redact  # _url imports this module

        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes the protocol does not allow (bad framing, oversized reply, garbage)."""


class JobwireConnectionError(JobwireError, ConnectionError):
    """The transport failed. Also a builtin ``ConnectionError``."""


class ConnectFailed(JobwireConnectionError):
    """The connection could not be opened (refused, unreachable, DNS, connect timeout)."""


class TLSError(ConnectFailed):
    """TLS could not be set up: the server's certificate or host name was refused, or the
    handshake failed. Never followed by a plaintext fallback."""


class ConnectionLost(JobwireConnectionError):
    """The connection closed or broke while requests were outstanding, or was already closed."""


class OperationTimeout(JobwireError, TimeoutError):
    """The caller's timeout ran out before the reply arrived. Also a builtin ``TimeoutError``."""


class PoolTimeout(OperationTimeout):
    """No client of a ``ClientPool`` came free within its ``checkout_timeout``: every one was
    in use. Nothing was sent, so the call is safe to retry."""


class NotSent(JobwireError):
    """An item of a bulk call that was never sent: the call stopped at an earlier item (the
    connection failed, a wait ran out, or an item was refused). Safe to retry."""


class BulkError(JobwireError):
    """A bulk call (``put_many``, ``delete_many``, ``add_many``, ``submit_background_many``,
    ``submit_many``; ``call_many`` when a command got no reply) did not succeed for every item.
    Raised ``from`` :attr:`error`.

    Attributes:
        results: one entry per item, in order: its result (what the call returns for it), or
            the exception it ended with.
        error: the first item's exception in that order: the real cause, e.g. the server's
            refusal, not the ``ConnectionLost`` the items after it got when the connection
            closed because of it.
        index: the index of that item.
        done: ``(index, result)`` of every item that succeeded, in order.

    What the other entries mean: a reply error of the protocol (``NotFound``, ``JobTooBig`` ...)
    is that item's own refusal; ``ConnectionLost`` or ``OperationTimeout``: it was sent but no
    reply came, so it may or may not have been carried out; :class:`NotSent`: never sent.
    """

    def __init__(self, results: Sequence[object]) -> None:
        failed = [(i, r) for i, r in enumerate(results) if isinstance(r, BaseException)]
        if not failed:
            raise ValueError("BulkError needs at least one failed item")
        self.results: list[object] = list(results)
        self.index, error = failed[0]
        self.error: BaseException = error
        self.done: list[tuple[int, object]] = [
            (i, r) for i, r in enumerate(results) if not isinstance(r, BaseException)
        ]
        super().__init__(
            f"{len(failed)} of {len(results)} items failed; the first, item {self.index}: "
            f"{error!r}"
        )

    @classmethod
    def check(cls, results: Sequence[object]) -> None:
        """Raise ``cls(results)`` (``from`` its first error) if any entry is an exception."""
        for entry in results:
            if isinstance(entry, BaseException):
                raise cls(results) from entry
