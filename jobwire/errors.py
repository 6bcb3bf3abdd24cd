"""Error base classes shared by every protocol in jobwire.

The tree::

    JobwireError
    ├── ProtocolError                 the byte stream broke a rule; the connection is unusable
    │   ├── LocalProtocolError        we (the caller) misused the API or gave invalid input
    │   │   └── InvalidAddress        a server address that no accepted form matches
    │   └── RemoteProtocolError       the peer sent something the protocol does not allow
    ├── JobwireConnectionError        (also a builtin ConnectionError)
    │   ├── ConnectFailed             could not connect at all
    │   └── ConnectionLost            the peer went away, possibly mid-reply
    └── OperationTimeout              (also a builtin TimeoutError) a caller's timeout ran out

Each protocol package adds its own reply errors (``BeanstalkError`` ...) under ``JobwireError``.
Server replies such as NOT_FOUND or TIMED_OUT are *results*, typed per protocol, never protocol
errors.
"""

from __future__ import annotations

__all__ = [
    "ConnectFailed",
    "ConnectionLost",
    "JobwireConnectionError",
    "InvalidAddress",
    "JobwireError",
    "LocalProtocolError",
    "OperationTimeout",
    "ProtocolError",
    "RemoteProtocolError",
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
    when the client, worker or admin object is built. Also a ``ValueError``."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes the protocol does not allow (bad framing, oversized reply, garbage)."""


class JobwireConnectionError(JobwireError, ConnectionError):
    """The transport failed. Also a builtin ``ConnectionError``."""


class ConnectFailed(JobwireConnectionError):
    """The connection could not be opened (refused, unreachable, DNS, connect timeout)."""


class ConnectionLost(JobwireConnectionError):
    """The connection closed or broke while requests were outstanding, or was already closed."""


class OperationTimeout(JobwireError, TimeoutError):
    """The caller's timeout ran out before the reply arrived. Also a builtin ``TimeoutError``."""
