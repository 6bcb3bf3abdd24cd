"""What every jobwire protocol shares: errors, addresses, back-off, buffers and streams.

The protocol packages are ``beanstalk_client`` (and, later, ``gearman_client`` and
``workq_client``); this package holds no protocol.
"""

from __future__ import annotations

from ._backoff import Backoff
from ._url import Address, TCPAddress, UnixAddress, parse_url
from .errors import (
    ConnectFailed,
    ConnectionLost,
    JobwireConnectionError,
    JobwireError,
    LocalProtocolError,
    OperationTimeout,
    ProtocolError,
    RemoteProtocolError,
)

__version__ = "0.1.0"

__all__ = [
    "Address",
    "Backoff",
    "ConnectFailed",
    "ConnectionLost",
    "JobwireConnectionError",
    "JobwireError",
    "LocalProtocolError",
    "OperationTimeout",
    "ProtocolError",
    "RemoteProtocolError",
    "TCPAddress",
    "UnixAddress",
    "parse_url",
]
