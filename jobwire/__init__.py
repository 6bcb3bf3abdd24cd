"""What every jobwire protocol shares: errors, addresses, back-off, buffers and streams.

The errors every package raises are importable from here: ``from jobwire import
SerializationError, DeserializationError`` (defined in :mod:`jobwire.serializers`), as are the
others of :mod:`jobwire.errors`.

The protocol packages are ``beanstalk_client``, ``gearman_client``, ``workq_client`` and
``qless_client``; this package holds no protocol.
"""

from __future__ import annotations

from ._backoff import Backoff
from ._url import (
    Address,
    AddressLike,
    TCPAddress,
    UnixAddress,
    parse_url,
    resolve_address,
    resolve_addresses,
)
from ._version import __version__ as __version__
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
    ProtocolError,
    RemoteProtocolError,
    TLSError,
)
from .serializers import DeserializationError, SerializationError

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
    "ProtocolError",
    "RemoteProtocolError",
    "SerializationError",
    "TLSError",
    "TCPAddress",
    "UnixAddress",
    "parse_url",
    "resolve_address",
    "resolve_addresses",
]
