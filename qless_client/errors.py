"""Typed errors of the qless package, and of the Redis connection under it.

The tree (the shared ``jobwire.errors`` classes are not repeated here)::

    JobwireError
    └── QlessError                    base of every error this package raises on purpose
        ├── RedisError                an error reply from Redis (``-ERR ...``): a *result*
        │   ├── AuthenticationError   AUTH / HELLO ... AUTH refused, or NOAUTH / WRONGPASS
        │   └── ScriptError           the qless script refused the call (``QLESS cmd: Reason``)
        │       ├── JobNotFound       no job has that jid
        │       ├── LostLock          the worker no longer holds the job's lock
        │       ├── WrongQueue        the job is not in the queue named
        │       ├── WrongState        the job is not in a state the call needs
        │       └── HasDependents     other jobs depend on the job being cancelled
        └── BulkError                 a pipeline did not succeed for every command

An error reply is an answer, not a broken connection: the connection stays usable after a
``RedisError``. Garbage from the server raises ``jobwire.RemoteProtocolError`` and poisons the
connection; a server that goes away raises ``jobwire.ConnectionLost``.
"""

from __future__ import annotations

from jobwire.errors import BulkError as _BulkError
from jobwire.errors import JobwireError

__all__ = [
    "AuthenticationError",
    "BulkError",
    "HasDependents",
    "JobNotFound",
    "LostLock",
    "QlessError",
    "RedisError",
    "ScriptError",
    "WrongQueue",
    "WrongState",
    "error_for",
]


class QlessError(JobwireError):
    """Base class of every error ``qless_client`` raises on purpose."""


class RedisError(QlessError):
    """Redis answered a command with an error reply.

    ``str(error)`` is the server's message verbatim (``"ERR unknown command 'FOO', ..."``);
    :attr:`code` is its first word (``"ERR"``, ``"NOSCRIPT"``, ``"WRONGTYPE"``, ``"BUSY"``...).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        #: The server's message, verbatim.
        self.message = message
        #: The error's first word: ``"ERR"``, ``"NOSCRIPT"``, ``"WRONGTYPE"``, ...
        self.code = message.split(" ", 1)[0]


class AuthenticationError(RedisError):
    """The server refused the credentials (``WRONGPASS``, or any error to the ``AUTH`` /
    ``HELLO ... AUTH`` sent on connect), or wants some (``NOAUTH``)."""


class ScriptError(RedisError):
    """The qless script refused the call: ``QLESS <command>: <Reason>: <detail>``.

    Nothing was changed: the script checks everything before its first write. The message is
    kept verbatim; :attr:`command`, :attr:`reason` and :attr:`detail` are its parts
    (docs/qless.md lists every reason).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        parts = message[6:].split(": ", 2) if message.startswith("QLESS ") else [""]
        #: The script command that refused (``"complete"``, ``"heartbeat"``...).
        self.command = parts[0]
        #: Why, in the script's words (``"Lost lock"``, ``"Job does not exist"``...).
        self.reason = parts[1] if len(parts) > 1 else ""
        #: The particulars (``"job j1 is held by w2"``).
        self.detail = parts[2] if len(parts) > 2 else ""


class JobNotFound(ScriptError):
    """No job has that jid (it never existed, was cancelled, or was pruned)."""


class LostLock(ScriptError):
    """The worker does not hold the job's lock any more: it expired, another worker popped
    the job, or the job was moved, failed or cancelled. The job must not be completed."""


class WrongQueue(ScriptError):
    """The job is not in the queue the call named."""


class WrongState(ScriptError):
    """The job is not in a state the call works on (``depends`` of a job not waiting on
    dependencies)."""


class HasDependents(ScriptError):
    """A job outside the call depends on a job being cancelled."""


class BulkError(_BulkError, QlessError):
    """A pipeline did not succeed for every command (see :class:`jobwire.errors.BulkError`).

    ``.results`` has one entry per command, in order: its reply, or the exception it ended
    with: a :class:`RedisError` (its own error reply: every reply was read, the connection is
    usable), ``ConnectionLost`` or ``OperationTimeout`` (sent, no reply: it may or may not have
    run), ``NotSent`` (never sent). ``.error`` is the first of them, ``.index`` its command,
    ``.done`` the ``(index, reply)`` of every command that succeeded.
    """


_AUTH_CODES = frozenset({"NOAUTH", "WRONGPASS"})


_SCRIPT_REASONS: dict[str, type[ScriptError]] = {
    "Job does not exist": JobNotFound,
    "Lost lock": LostLock,
    "Wrong queue": WrongQueue,
    "Wrong state": WrongState,
    "Has dependents": HasDependents,
}


def error_for(message: str) -> RedisError:
    """The exception for an error reply carrying ``message``."""
    code = message.split(" ", 1)[0]
    if code in _AUTH_CODES:
        return AuthenticationError(message)
    if code == "QLESS":
        reason = message[6:].split(": ", 2)[1:2]
        return _SCRIPT_REASONS.get(reason[0] if reason else "", ScriptError)(message)
    return RedisError(message)
