"""Job bodies as Python values: the ``serializer=`` hook every client of the collection takes.

A body is bytes on every wire. A client built with ``serializer=`` turns what you give it into
those bytes (``dumps``) and what the server hands back into your type (``loads``), so one object
says how bodies look, for every call that sends or returns one::

    from jobwire.serializers import JSON, TEXT

    beanstalk_client.Client(address, serializer=TEXT)      # str bodies, UTF-8 on the wire
    gearman_client.Client(servers, serializer=JSON)        # any JSON value in and out
    workq_client.Client(address, serializer=Text("latin-1"))

:data:`RAW` (bytes in, bytes out) is the default of beanstalk, Gearman and Workq; qless stores
job data as JSON text (every qless binding reads it, and the script refuses anything else), so
its default is :data:`JSON`, and a serializer given to it must write JSON.

Any object with ``dumps(value) -> bytes`` and ``loads(bytes) -> value`` is a serializer (the
:class:`Serializer` protocol): wrap pydantic, msgpack or your own format the same way. The
clients are generic in the body type (``Client[str]`` with :data:`TEXT`), so a type checker
knows what ``reserve()`` returns.

Errors: a value the serializer cannot write raises :class:`SerializationError` (a
``LocalProtocolError``, hence a ``ValueError``) at the call that received it, before anything is
sent. A body from the server it cannot read raises :class:`DeserializationError`, which carries
the raw bytes (``.data``) and the job's id (``.job_id``: the beanstalk id, the Gearman handle,
the Workq id, the qless jid) so the job can still be buried, failed or deleted; the connection
stays usable (the whole reply was read).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar, cast

from .errors import JobwireError, LocalProtocolError

__all__ = [
    "JSON",
    "RAW",
    "TEXT",
    "DeserializationError",
    "Json",
    "Raw",
    "SerializationError",
    "Serializer",
    "Text",
    "detail",
    "dump",
    "dump_all",
    "load",
    "or_raw",
]

T = TypeVar("T")


class Serializer(Protocol[T]):
    """How job bodies of type ``T`` become bytes and back."""

    def dumps(self, value: T, /) -> bytes:
        """The bytes to send for ``value``; raise ``TypeError``/``ValueError`` if it has none."""
        ...

    def loads(self, data: bytes, /) -> T:
        """The value of a body the server sent; raise ``ValueError`` if it is not one."""
        ...


class SerializationError(LocalProtocolError):
    """A body the client's serializer cannot write (a ``str`` to a bytes client, a value JSON
    cannot hold, a character the encoding lacks). Raised at the call, before anything is sent."""


class DeserializationError(JobwireError, ValueError):
    """A body from the server that the client's serializer cannot read.

    The reply was read whole, so the connection stays usable; the job itself is as the call
    left it (reserved, leased, popped): settle it by ``job_id``.

    Attributes:
        data: the body as the server sent it.
        job_id: the job it belongs to (beanstalk id, Gearman handle, Workq id, qless jid), or
            ``None`` when the call names no job.
    """

    def __init__(self, message: str, data: bytes, job_id: int | str | bytes | None = None) -> None:
        super().__init__(message)
        self.data = data
        self.job_id = job_id


class Raw:
    """Bodies are ``bytes``, sent and returned exactly as they are (the default, but for
    qless). ``bytearray`` and ``memoryview`` are sent as their bytes."""

    __slots__ = ()

    def dumps(self, value: bytes, /) -> bytes:
        if type(value) is bytes:
            return value
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        hint = " (pass serializer=TEXT for str bodies)" if isinstance(value, str) else ""
        raise TypeError(f"a body is bytes, not {type(value).__name__}{hint}")

    def loads(self, data: bytes, /) -> bytes:
        return data

    def __repr__(self) -> str:
        return "RAW"


class Text:
    """Bodies are ``str``, in ``encoding`` on the wire.

    Args:
        encoding: any codec Python knows (default UTF-8).
        errors: what to do with a character (or byte) the codec cannot map: ``"strict"``
            (the default) raises; ``"replace"``, ``"surrogateescape"``... as ``str.encode``.

    Raises:
        LookupError: an unknown codec (when built, not on first use).
    """

    __slots__ = ("encoding", "errors")

    def __init__(self, encoding: str = "utf-8", errors: str = "strict") -> None:
        self.encoding = codecs.lookup(encoding).name
        codecs.lookup_error(errors)
        self.errors = errors

    def dumps(self, value: str, /) -> bytes:
        if not isinstance(value, str):
            raise TypeError(f"a body is str, not {type(value).__name__}")
        return value.encode(self.encoding, self.errors)

    def loads(self, data: bytes, /) -> str:
        return data.decode(self.encoding, self.errors)

    def __repr__(self) -> str:
        if self is TEXT:
            return "TEXT"
        extra = "" if self.errors == "strict" else f", {self.errors!r}"
        return f"Text({self.encoding!r}{extra})"


class Json:
    """Bodies are JSON values (``dict``, ``list``, ``str``, numbers, ``bool``, ``None``), as
    compact UTF-8 JSON text. NaN and infinities are refused (JSON has none).

    Args:
        default: called for objects JSON cannot hold (a ``datetime``...); returns something it
            can, or raises ``TypeError`` (``json.dumps``'s ``default``).
        sort_keys: write object keys sorted.
        ensure_ascii: escape non-ASCII characters (``\\u00e9``), as the qless bindings write.
    """

    __slots__ = ("_encoder",)

    def __init__(
        self,
        *,
        default: Callable[[Any], Any] | None = None,
        sort_keys: bool = False,
        ensure_ascii: bool = True,
    ) -> None:
        self._encoder = json.JSONEncoder(
            allow_nan=False, separators=(",", ":"), default=default, sort_keys=sort_keys,
            ensure_ascii=ensure_ascii,
        )

    def dumps(self, value: Any, /) -> bytes:
        return self._encoder.encode(value).encode()

    def loads(self, data: bytes, /) -> Any:
        return json.loads(data)

    def __repr__(self) -> str:
        return "JSON" if self is JSON else "Json(...)"


#: Bytes in, bytes out: the default of beanstalk, Gearman and Workq.
RAW = Raw()
#: ``str`` bodies, UTF-8 on the wire (greenstalk's ``encoding="utf-8"``).
TEXT = Text()
#: Any JSON value: the default of qless.
JSON = Json()


def _is_raw(serializer: object) -> bool:
    return serializer is RAW


def detail(serializer: object, default: object = RAW) -> str:
    """``serializer=...`` for a ``repr``, or ``""`` for the client's default."""
    return "" if serializer is default else f"serializer={serializer!r}"


def or_raw(serializer: Serializer[T] | None) -> Serializer[T]:
    """``serializer``, or :data:`RAW` for ``None`` (the clients' default; the body type then
    defaults to ``bytes``)."""
    return cast("Serializer[T]", RAW) if serializer is None else serializer


def dump(serializer: Serializer[T], value: T, what: str = "body") -> bytes:
    """``serializer.dumps(value)``, checked.

    Raises:
        SerializationError: the serializer raised (``.__cause__`` is what it raised), or
            returned something that is not bytes.
    """
    try:
        data = serializer.dumps(value)
    except Exception as exc:
        raise SerializationError(f"{what} cannot be written by {serializer!r}: {exc}") from exc
    if type(data) is not bytes:
        if isinstance(data, (bytearray, memoryview)):
            return bytes(data)
        raise SerializationError(
            f"{serializer!r}.dumps returned {type(data).__name__}, not bytes"
        )
    return data


def dump_all(serializer: Serializer[T], values: Iterable[T], what: str = "body") -> list[bytes]:
    """:func:`dump` of every value (a bulk call's bodies), naming the first bad one's index.

    Raises:
        SerializationError: as :func:`dump`.
    """
    if _is_raw(serializer):  # the default: no call per body that is bytes already
        return [cast(bytes, value) if type(value) is bytes
                else dump(serializer, value, f"{what} {i}")
                for i, value in enumerate(values)]
    return [dump(serializer, value, f"{what} {i}") for i, value in enumerate(values)]


def load(
    serializer: Serializer[T], data: bytes, job_id: int | str | bytes | None = None,
    what: str = "body",
) -> T:
    """``serializer.loads(data)``, checked.

    Raises:
        DeserializationError: the serializer raised (``.__cause__`` is what it raised); it
            carries ``data`` and ``job_id``.
    """
    if _is_raw(serializer):
        return cast("T", data)
    try:
        return serializer.loads(data)
    except Exception as exc:
        job = "" if job_id is None else f" of job {job_id!r}"
        raise DeserializationError(
            f"the {what}{job} cannot be read by {serializer!r}: {exc}", data, job_id
        ) from exc
