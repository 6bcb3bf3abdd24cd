"""Server addresses and the URLs that name them.

Accepted forms (``SCHEME`` is the protocol's own: ``beanstalk``, ``gearman``, ``workq``)::

    SCHEME://host            default port of the protocol
    SCHEME://host:port
    SCHEME://[::1]:port      IPv6 literal
    unix:///path/to/socket   a unix domain socket
    SCHEME+unix:///path
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from .errors import LocalProtocolError

__all__ = ["Address", "TCPAddress", "UnixAddress", "parse_url"]


@dataclass(frozen=True, slots=True)
class TCPAddress:
    """A host name or IP literal and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class UnixAddress:
    """A unix domain socket path."""

    path: str

    def __str__(self) -> str:
        return f"unix:{self.path}"


Address = TCPAddress | UnixAddress


def parse_url(url: str, *, scheme: str, default_port: int) -> Address:
    """Parse ``url`` into an address.

    Raises:
        LocalProtocolError: the scheme is not ``scheme``, ``unix`` or ``scheme+unix``, the port is
            not a number in 1-65535, or the URL has no host or path.
    """
    parts = urlsplit(url)
    if parts.scheme in ("unix", f"{scheme}+unix"):
        if parts.query or parts.fragment:
            raise LocalProtocolError(f"{url!r}: '?' and '#' must be percent-encoded in a path")
        path = unquote(parts.path)
        if parts.netloc:  # unix://relative/path is ambiguous; accept it as netloc+path
            path = parts.netloc + path
        if not path:
            raise LocalProtocolError(f"{url!r}: a unix socket URL needs a path")
        return UnixAddress(path)
    if parts.scheme != scheme:
        raise LocalProtocolError(
            f"{url!r}: expected a {scheme}://host:port or unix:///path URL"
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise LocalProtocolError(f"{url!r}: {exc}") from None
    if not parts.hostname:
        raise LocalProtocolError(f"{url!r}: no host")
    if port is not None and not 1 <= port <= 65535:
        raise LocalProtocolError(f"{url!r}: port must be 1-65535")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise LocalProtocolError(f"{url!r}: unexpected path, query or fragment")
    return TCPAddress(parts.hostname, default_port if port is None else port)
