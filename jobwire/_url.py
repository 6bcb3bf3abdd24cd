"""Server addresses: one rule for every client, worker and admin class of the collection.

Every class that connects takes its server as ``address`` (and, optionally, ``port``) in any of
these forms (``SCHEME`` is the protocol's own: ``beanstalk`` (also ``beanstalkd``, the server's
name, as other beanstalk clients write it), ``gearman``, ``workq``)::

    "SCHEME://host"               default port of the protocol
    "SCHEME://host:port"          also "SCHEME://[::1]:port"
    "unix:///path/to/socket"      a unix domain socket (also "SCHEME+unix:///path")
    ("host", port)                a tuple, as socket.connect takes it
    "host:port"                   as libgearman, gear, pygearman and redis-cli take it
    "[::1]:port", "::1"           IPv6 literals, bracketed when a port follows
    "host"                        the protocol's default port
    "/path/to/socket"             a unix socket path (absolute, or starting with "./")
    "host", port                  host and port as two arguments
    TCPAddress / UnixAddress      already resolved

Anything else is refused when the object is built, never later: a value of the wrong type raises
``TypeError``; a malformed string (an unclosed ``[`` of an IPv6 literal included), a port outside
1-65535 or a unix path where the protocol has none raises :class:`InvalidAddress` (a
``LocalProtocolError``, hence a ``ValueError``).

No message shows a credential: :class:`InvalidAddress` passes its message through
:func:`redact`, which writes a URL's password (``redis://user:***@host``) and a
``password=``-like query value (``?password=***``) as ``***``.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Sequence
from urllib.parse import SplitResult, unquote, urlsplit

from ._record import record
from .errors import InvalidAddress

__all__ = [
    "Address",
    "AddressLike",
    "InvalidAddress",
    "TCPAddress",
    "UnixAddress",
    "address_url",
    "describe",
    "parse_url",
    "redact",
    "split_url",
    "resolve_address",
    "resolve_addresses",
]


@record
class TCPAddress:
    """A host name or IP literal and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@record
class UnixAddress:
    """A unix domain socket path."""

    path: str

    def __str__(self) -> str:
        return f"unix:{self.path}"


Address = TCPAddress | UnixAddress
#: What a constructor accepts as a server address (see the module's docstring).
AddressLike = str | os.PathLike[str] | tuple[str, int] | TCPAddress | UnixAddress

_BAD_HOST_CHARS = frozenset(" \t\r\n\x00/?#@")
_BRACKETED = re.compile(r"\[[^\[\]]+\](?::[^\[\]]*)?")
# A URL's user info: everything between "scheme://" and the last "@" before the path, query or
# fragment (a password may hold an "@" of its own). Quotes may be in a password (repr then
# quotes with the other kind); white space ends the URL.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^/?#\s]*)@")
# A query value that names a secret, up to the next "&", ";", "#" or white space, or a quote that
# closes a repr (followed by ":", ",", ")", "]", white space or the end).
_SECRET_QUERY = re.compile(
    r"(?P<key>[?&;](?:[a-z_]*pass(?:word|wd)?|pwd|secret|token|auth|api_?key)=)"
    r"(?P<value>.*?)(?=['\"](?:[:,)\]\s]|$)|[&#;\s]|$)",
    re.IGNORECASE,
)


def _hide_userinfo(match: re.Match[str]) -> str:
    user, colon, _password = match["info"].partition(":")
    # With no ":" the whole user info may be a password (redis://secret@host, as some write it).
    return f"{match['scheme']}{user}:***@" if colon else f"{match['scheme']}***@"


def redact(text: str) -> str:
    """``text`` with every credential of the URLs in it written as ``***``: the password of a
    ``scheme://user:password@host`` (the whole user info when it has no ``:``), and the value
    of a ``password=``, ``passwd=``, ``secret=``, ``token=``, ``auth=`` or ``api_key=`` query
    parameter. Errors, logs and reprs that may show an address given by the user go through it.
    """
    if "@" in text:
        text = _USERINFO.sub(_hide_userinfo, text)
    if "=" in text:
        text = _SECRET_QUERY.sub(r"\g<key>***", text)
    return text


#: Other spellings of a protocol's scheme: ``beanstalkd://`` is what greenstalk, pystalk and
#: most beanstalk tooling write.
SCHEME_ALIASES: dict[str, tuple[str, ...]] = {"beanstalk": ("beanstalkd",)}


def address_url(address: Address, scheme: str) -> str:
    """``address`` written as a URL of ``scheme`` (``beanstalk://127.0.0.1:11300``,
    ``unix:///run/beanstalkd.sock``): what the classes show in their ``repr``."""
    if isinstance(address, UnixAddress):
        return f"unix://{address.path}"
    return f"{scheme}://{address}"


def describe(obj: object, where: str, *details: str) -> str:
    """``<package.Class where detail ...>``: the ``repr`` of every client, admin and worker
    class of the collection (``<beanstalk_client.Client beanstalk://127.0.0.1:11300
    tube='default'>``). Empty details are left out; never put a password in one."""
    cls = type(obj)
    name = f"{cls.__module__.partition('.')[0]}.{cls.__qualname__}"
    return "<" + " ".join([name, where, *(d for d in details if d)]) + ">"


def _port(value: object, where: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(redact(f"{where!r}: the port must be an int, not {type(value).__name__}"))
    if not 1 <= value <= 65535:
        raise InvalidAddress(f"{where!r}: the port must be 1-65535")
    return value


def _host(host: str, where: object) -> str:
    if not host:
        raise InvalidAddress(f"{where!r}: no host")
    if any(c in _BAD_HOST_CHARS or not c.isprintable() for c in host):
        raise InvalidAddress(f"{where!r}: not a host name or IP address")
    if host.isdigit():  # ("host", "4730") read as a list of servers, or a port given alone
        raise InvalidAddress(f"{where!r}: {host!r} is a port, not a host (write 'host:port')")
    if ":" in host:
        try:
            ipaddress.IPv6Address(host.partition("%")[0])
        except ValueError:
            raise InvalidAddress(f"{where!r}: not an IPv6 address (or 'host:port')") from None
    return host


def split_url(url: str) -> SplitResult:
    """``urllib.parse.urlsplit``, raising :class:`InvalidAddress` where it raises
    ``ValueError`` (an unclosed or malformed ``[IPv6]`` host) or lets a stray bracket through
    (``[::1]]:1``)."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidAddress(f"{url!r}: {exc}") from None
    host = parts.netloc.rpartition("@")[2]
    if ("[" in host or "]" in host) and _BRACKETED.fullmatch(host) is None:
        raise InvalidAddress(f"{url!r}: expected '[IPv6]' or '[IPv6]:port' as the host")
    return parts


def parse_url(url: str, *, scheme: str, default_port: int, unix: bool = True) -> Address:
    """Parse a ``SCHEME://host[:port]`` or ``unix:///path`` URL into an address.

    ``scheme``'s other spellings (:data:`SCHEME_ALIASES`: ``beanstalkd://``) are accepted too.

    Raises:
        InvalidAddress: the URL is malformed (an unclosed ``[``), the scheme is not
            ``scheme`` (or one of its aliases), ``unix`` or ``scheme+unix``, the port is not a
            number in 1-65535, the URL has no host or path, or it names a unix socket and
            ``unix`` is false.
    """
    parts = split_url(url)
    schemes = (scheme, *SCHEME_ALIASES.get(scheme, ()))
    if parts.scheme == "unix" or parts.scheme in {f"{s}+unix" for s in schemes}:
        if not unix:
            raise InvalidAddress(f"{url!r}: {scheme} servers listen on TCP only")
        if parts.query or parts.fragment:
            raise InvalidAddress(f"{url!r}: '?' and '#' must be percent-encoded in a path")
        path = unquote(parts.path)
        if parts.netloc:  # unix://relative/path is ambiguous; accept it as netloc+path
            path = parts.netloc + path
        if not path:
            raise InvalidAddress(f"{url!r}: a unix socket URL needs a path")
        return UnixAddress(path)
    if parts.scheme not in schemes:
        expected = f"{scheme}://host:port" + (" or unix:///path" if unix else "")
        raise InvalidAddress(f"{url!r}: expected a {expected} URL")
    try:
        port = parts.port
    except ValueError as exc:
        raise InvalidAddress(f"{url!r}: {exc}") from None
    if not parts.hostname:
        raise InvalidAddress(f"{url!r}: no host")
    if port is not None and not 1 <= port <= 65535:
        raise InvalidAddress(f"{url!r}: port must be 1-65535")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidAddress(f"{url!r}: unexpected path, query or fragment")
    return TCPAddress(_host(parts.hostname, url), default_port if port is None else port)


def _split_host_port(text: str) -> tuple[str, str | None]:
    """``"h:p"`` → (h, p); ``"[v6]:p"`` → (v6, p); ``"[v6]"``, ``"v6"`` and ``"h"`` → (…, None)."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise InvalidAddress(f"{text!r}: unclosed '['")
        rest = text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise InvalidAddress(f"{text!r}: expected ':port' after ']'")
        return text[1:end], (rest[1:] if rest else None)
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, port
    return text, None  # a bare host, or an IPv6 literal without a port


def resolve_address(
    address: object,
    port: object = None,
    *,
    scheme: str,
    default_port: int,
    unix: bool = True,
) -> Address:
    """Turn any accepted form of a server address (see the module) into an :data:`Address`.

    Args:
        address: the server, in one of the accepted forms.
        port: a port for a bare host given as ``address``; refused with any other form.
        scheme: the protocol's URL scheme.
        default_port: the port when none is given.
        unix: whether the protocol's servers can listen on unix sockets.

    Raises:
        TypeError: ``address`` or ``port`` is of a type no form takes.
        InvalidAddress: the value is malformed (see :func:`parse_url` for URLs).
    """
    if isinstance(address, (TCPAddress, UnixAddress)):
        resolved: Address = address
    elif isinstance(address, tuple):
        if len(address) != 2 or not isinstance(address[0], str):
            raise TypeError(redact(f"{address!r}: a tuple address is (host, port)"))
        resolved = TCPAddress(_host(address[0], address), _port(address[1], address))
    elif isinstance(address, os.PathLike):
        resolved = UnixAddress(os.fspath(address))
    elif isinstance(address, str):
        text = address.strip()
        if text != address or not text:
            raise InvalidAddress(f"{address!r}: empty, or white space around the address")
        if "://" in text:
            resolved = parse_url(text, scheme=scheme, default_port=default_port, unix=unix)
        elif text.startswith(("/", "./", "../")):
            resolved = UnixAddress(text)
        else:
            host, port_text = _split_host_port(text)
            if port_text is None:
                number = default_port if port is None else _port(port, (address, port))
                return TCPAddress(_host(host, address), number)
            if not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
                raise InvalidAddress(f"{address!r}: the port must be a number in 1-65535")
            resolved = TCPAddress(_host(host, address), _port(int(port_text), address))
    else:
        raise TypeError(redact(
            f"{address!r}: a server address is a URL, 'host:port', 'host', a unix path or a "
            f"(host, port) tuple, not {type(address).__name__}"
        ))
    if port is not None:
        raise InvalidAddress(f"{address!r}: a port argument goes with a bare host only")
    if isinstance(resolved, UnixAddress) and not unix:
        raise InvalidAddress(f"{address!r}: {scheme} servers listen on TCP only")
    return resolved


def resolve_addresses(
    servers: object, *, scheme: str, default_port: int, unix: bool = True
) -> list[Address]:
    """A list of servers: one address in any form, a comma-separated string of them (as
    libgearman's ``--servers`` and ``GEARMAN_SERVERS`` take), or a sequence of addresses.

    Raises:
        TypeError, InvalidAddress: as :func:`resolve_address`; also for an empty list.
    """
    items: Sequence[object]
    if isinstance(servers, str) and "," in servers and not servers.startswith(("/", "unix:")):
        items = [s.strip() for s in servers.split(",")]
    elif isinstance(servers, (str, TCPAddress, UnixAddress, os.PathLike)) or (
        isinstance(servers, tuple) and len(servers) == 2 and isinstance(servers[1], int)
    ):
        items = [servers]
    elif isinstance(servers, Sequence):
        items = servers
    else:
        raise TypeError(redact(f"{servers!r}: expected a server address or a list of them"))
    if not items:
        raise InvalidAddress("at least one server is needed")
    return [
        resolve_address(s, scheme=scheme, default_port=default_port, unix=unix) for s in items
    ]
