"""What every jobwire protocol shares: errors, addresses, back-off, buffers and streams.

The errors every package raises are importable from here: ``from jobwire import
SerializationError, DeserializationError`` (defined in :mod:`jobwire.serializers`), as are the
others of :mod:`jobwire.errors`.

The protocol packages are ``beanstalk_client``, ``gearman_client``, ``workq_client`` and
``qless_client``; this package holds no protocol.

Every public name loads its module on first use (:mod:`jobwire._lazy`): each protocol package
imports this one first, and the bundled servers import none of the back-off, address-parsing
or serializer modules they do not use (``dataclasses``, ``inspect``, ``json``: about 50 ms of a
server's start, paid before it could answer).
"""

from __future__ import annotations

from ._lazy import lazy_exports
from ._version import __version__ as __version__

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from ._backoff import Backoff
    from ._retry import RetryPolicy
    from ._url import (
        Address,
        AddressLike,
        TCPAddress,
        UnixAddress,
        parse_url,
        resolve_address,
        resolve_addresses,
    )
    from .errors import (
        BulkError,
        ConnectFailed,
        ConnectionLost,
        InvalidAddress,
        JobwireConnectionError,
        JobwireError,
        LocalProtocolError,
        NotSent,
        OperationTimeout,
        PoolTimeout,
        ProtocolError,
        RemoteProtocolError,
        TLSError,
    )
    from .serializers import DeserializationError, SerializationError

__getattr__, __dir__ = lazy_exports(__name__)

__all__ = [
    "Address",
    "AddressLike",
    "Backoff",
    "BulkError",
    "ConnectFailed",
    "ConnectionLost",
    "DeserializationError",
    "InvalidAddress",
    "JobwireConnectionError",
    "JobwireError",
    "LocalProtocolError",
    "NotSent",
    "OperationTimeout",
    "PoolTimeout",
    "ProtocolError",
    "RemoteProtocolError",
    "RetryPolicy",
    "SerializationError",
    "TLSError",
    "TCPAddress",
    "UnixAddress",
    "parse_url",
    "resolve_address",
    "resolve_addresses",
]
