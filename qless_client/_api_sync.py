# GENERATED from _api_async.py by scripts/unasync.py: do not edit.
"""The Redis calls as async methods: the single source of the connection API.

``_api_sync.py`` is generated from this file by ``scripts/unasync.py`` (a test fails when the two
drift apart). Every rule of the wire format lives in the Sans-IO core (``_resp.py``), every byte
moved in the transports (``_redis.py`` on ``jobwire._transport``); these methods only shape calls
and replies: pipelines, scripts and their NOSCRIPT recovery.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from jobwire._pending import Pending
from jobwire.errors import LocalProtocolError, RemoteProtocolError

from ._resp import Arg, encode_command
from .errors import BulkError, RedisError

__all__ = ["DEFAULT_WINDOW", "RedisCommands"]

#: Commands in flight at once in a pipeline.
DEFAULT_WINDOW = 1024
#: A command's follow-up: its Pending's ``then``, run when its reply (or error) is dispatched,
#: in the order replies come, in whichever task reads them, before its caller wakes.
Then = Callable[[Pending[Any]], None]


def _script_bytes(source: str | bytes) -> bytes:
    if isinstance(source, str):
        return source.encode()
    if isinstance(source, (bytes, bytearray)):
        return bytes(source)
    raise LocalProtocolError(f"a script is str or bytes, not {type(source).__name__}")


def _evalsha_args(sha: str, keys: Sequence[Arg], args: Sequence[Arg]) -> list[Arg]:
    if not isinstance(sha, str):
        raise LocalProtocolError(f"a script's sha is a str, not {type(sha).__name__}")
    for what, seq in (("keys", keys), ("args", args)):
        if isinstance(seq, (str, bytes, bytearray)) or not isinstance(seq, Sequence):
            raise LocalProtocolError(f"{what} must be a sequence of arguments, not {seq!r:.60}")
    return ["EVALSHA", sha, len(keys), *keys, *args]


class RedisCommands:
    """Redis calls. Transports supply ``_call``, ``_call_many`` and ``_scripts``."""

    #: Script sources by SHA1, for reloading on ``NOSCRIPT`` (kept across reconnects).
    _scripts: dict[str, bytes]

    def _call(
        self, args: Sequence[Arg], wait: float | None = 0.0, then: Then | None = None
    ) -> Any:
        """Send one command and return its reply (or raise its ``RedisError``); ``wait`` is how
        long the server may legitimately hold the reply back (``None``: without limit);
        ``then`` becomes the command's ``Pending.then`` (see :data:`Then`)."""
        raise NotImplementedError

    def _call_encoded(self, data: bytes, name: str, then: Then | None = None) -> Any:
        """:meth:`_call` of one command already encoded (``data``), named ``name`` in messages,
        that the server answers at once (not a blocking one)."""
        raise NotImplementedError

    def _call_many(
        self, commands: Iterable[bytes], window: int, thens: Iterable[Then] | None = None
    ) -> list[Pending[Any]]:
        """Pipeline ``commands``; with ``thens``, the ``i``-th is the ``i``-th command's
        ``Pending.then``."""
        raise NotImplementedError

    def execute(self, *args: Arg, wait: float | None = 0.0) -> Any:
        """Send one command (``execute("SET", "key", b"value")``) and return its reply:
        ``bytes``, ``str``, ``int``, ``None``, ``list``... (``_resp`` says which is which).

        Args:
            args: the command's name and arguments: ``str`` (UTF-8), ``bytes``, ``int`` or
                ``float``.
            wait: seconds the server may legitimately hold the reply back (a ``BLPOP``'s own
                timeout), added to the client's ``timeout``; ``None`` waits without limit.

        Raises:
            RedisError: the server answered with an error (the connection stays usable).
            LocalProtocolError: an argument cannot be sent, or the command (pub/sub, MONITOR,
                CLIENT REPLY, RESET) would break the reply order: nothing is sent.
            OperationTimeout: no reply in time (see the client's ``timeout``).
            ConnectionLost, ConnectFailed, RemoteProtocolError: the connection failed.
        """
        return self._call(args, wait)

    def pipeline(
        self, commands: Iterable[Sequence[Arg]], *, window: int = DEFAULT_WINDOW
    ) -> list[Any]:
        """Send many commands without waiting for each reply (at most ``window`` unanswered at
        once) and return their replies, in order.

        Every command is validated before the first is sent. This is not a transaction: other
        clients' commands may run in between (wrap in ``MULTI``/``EXEC`` for that).

        Raises:
            BulkError: some commands did not succeed. ``.results`` has, in order, each reply
                or the exception its command ended with: a ``RedisError`` (its error reply; the
                connection stays usable), ``ConnectionLost``/``OperationTimeout`` (sent, no
                reply), ``NotSent``; ``.error`` is the first of them.
            LocalProtocolError: a command cannot be sent, or ``window`` < 1: nothing is sent.
            ConnectionLost, ConnectFailed: the connection failed before anything was sent.
        """
        return self._pipeline(commands, window)

    def _pipeline(
        self, commands: Iterable[Sequence[Arg]], window: int,
        thens: Sequence[Then] | None = None,
    ) -> list[Any]:
        """:meth:`pipeline`; with ``thens``, one per command, each set as that command's
        ``Pending.then`` (:data:`Then`)."""
        encoded = [encode_command(command) for command in commands]
        if not encoded:
            return []
        pendings = self._call_many(encoded, window, thens)
        results = [p.reply if p.error is None else p.error for p in pendings]
        BulkError.check(results)
        return results

    def load_script(self, source: str | bytes) -> str:
        """Send ``SCRIPT LOAD``: load a Lua script into the server's cache; return its SHA1.

        The source is remembered, so :meth:`evalsha` can load it again if the server forgets
        it (a restart, ``SCRIPT FLUSH``).

        Raises:
            RedisError: the script does not compile (``ERR Error compiling script ...``).
            RemoteProtocolError: the server's SHA1 is not the script's.
        """
        data = _script_bytes(source)
        sha = hashlib.sha1(data).hexdigest()
        reply = self._call(("SCRIPT", "LOAD", data))
        if isinstance(reply, (bytes, str)):
            got = reply.decode("ascii", "replace") if isinstance(reply, bytes) else reply
        else:
            got = repr(reply)
        if got.lower() != sha:
            raise RemoteProtocolError(f"SCRIPT LOAD answered {got[:60]!r}, not the SHA1 {sha}")
        self._scripts[sha] = data
        return sha

    def evalsha(
        self, sha: str, keys: Sequence[Arg] = (), args: Sequence[Arg] = ()
    ) -> Any:
        """Send ``EVALSHA sha numkeys *keys *args``: run a cached script; return its reply.

        If the server answers ``NOSCRIPT`` (it restarted, or ran ``SCRIPT FLUSH``) and the
        script was loaded through :meth:`load_script` of this object, it is loaded again and
        the call retried once.

        Raises:
            RedisError: the script raised an error, or ``NOSCRIPT`` for a script this object
                never loaded (or the retry's own error).
            LocalProtocolError: ``keys`` or ``args`` is not a sequence of arguments.
            OperationTimeout, ConnectionLost, ConnectFailed, RemoteProtocolError: as for
                :meth:`execute`.
        """
        return self._evalsha(sha, keys, args)

    def _evalsha(
        self, sha: str, keys: Sequence[Arg], args: Sequence[Arg], then: Then | None = None
    ) -> Any:
        """:meth:`evalsha`, with ``then`` set as each attempt's ``Pending.then``
        (:data:`Then`): a ``NOSCRIPT`` attempt's too, which ``then`` sees fail."""
        return self._evalsha_encoded(
            sha, encode_command(_evalsha_args(sha, keys, args)), then
        )

    def _evalsha_encoded(self, sha: str, data: bytes, then: Then | None = None) -> Any:
        """:meth:`_evalsha` of the command already encoded (``data``: ``encode_command``'s or
        ``encode_evalsha``'s bytes of ``EVALSHA sha ...``)."""
        try:
            return self._call_encoded(data, "EVALSHA", then)
        except RedisError as exc:
            source = self._scripts.get(sha.lower())
            if exc.code != "NOSCRIPT" or source is None:
                raise
        self.load_script(source)
        return self._call_encoded(data, "EVALSHA", then)
