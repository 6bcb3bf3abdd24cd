"""Typed errors of the qless package, and of the Redis connection under it.

The tree (the shared ``jobwire.errors`` classes are not repeated here)::

    JobwireError
    └── QlessError                    base of every error this package raises on purpose
        ├── RedisError                an error reply from Redis (``-ERR ...``): a *result*
        │   ├── AuthenticationError   AUTH / HELLO ... AUTH refused, or NOAUTH / WRONGPASS
        │   └── ScriptError           the qless script refused the call (qless-core's message)
        │       ├── JobNotFound       no job (or recurring job) has that jid
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

import re

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
    "split_script_error",
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


_REDIS7_ERROR = re.compile(
    r"^(?:ERR )?(?:user_script:\d+: )?(?P<text>.*?)"
    r"(?: script: [0-9a-fA-F]{40}, on @user_script:\d+\.)?$",
    re.DOTALL,
)
_FUNCTION = re.compile(r"^(?P<command>[A-Za-z][\w ]*)\(\): (?P<rest>.*)$", re.DOTALL)


def split_script_error(message: str) -> tuple[str, str, str, str]:
    """Take apart an error a script raised, as Redis 7 answers it (``ERR user_script:<line>:
    <text> script: <sha>, on @user_script:<line>.``): ``(text, command, reason, detail)``,
    e.g. ``("Heartbeat(): Job given out to another worker: w1", "Heartbeat", "Job given out
    to another worker", "w1")``."""
    match = _REDIS7_ERROR.match(message)
    text = match.group("text") if match else message
    parts = _FUNCTION.match(text)
    command, rest = (parts.group("command"), parts.group("rest")) if parts else ("", text)
    reason, _, detail = rest.partition(": ")
    return text, command, reason, detail


class ScriptError(RedisError):
    """The qless script refused the call, with qless-core's message, as Redis 7 wraps an error
    raised by a script::

        ERR user_script:786: Heartbeat(): Job given out to another worker: w1 script: <sha>, ...

    The message is kept verbatim; :attr:`text` is qless-core's part of it, and
    :attr:`command`, :attr:`reason` and :attr:`detail` are its parts (``Heartbeat``, ``Job
    given out to another worker``, ``w1``). The subclass is picked from qless-core's text (the
    table in docs/qless.md).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        text, command, reason, detail = split_script_error(message)
        #: qless-core's message (``"Complete(): Job does not exist"``).
        self.text = text
        #: The script function that refused (``"Complete"``, ``"Heartbeat"``...), or "".
        self.command = command
        #: Why, in qless-core's words (``"Job does not exist"``...).
        self.reason = reason
        #: The particulars (the worker holding the job, its state...).
        self.detail = detail


class JobNotFound(ScriptError):
    """No job has that jid (it never existed, was cancelled, or was pruned); also no recurring
    job, for the ``recur.*`` calls. qless-core: ``... does not exist``, ``No recurring job``."""


class LostLock(ScriptError):
    """The worker does not hold the job's lock any more: another worker popped the job
    (qless-core: ``... another worker``), or it is not running any more (timed out, moved,
    failed, completed: ``Job (is) not currently running`` to ``complete``, ``retry`` or
    ``heartbeat``). The job must not be completed."""


class WrongQueue(ScriptError):
    """The job is not in the queue the call named (``complete`` or ``retry`` naming another
    queue: ``Job is in queue "a", not "b"``, a check jobwire's script keeps where qless-core
    would leave the job's lock behind)."""


class WrongState(ScriptError):
    """The job is not in a state the call works on: ``fail`` or ``timeout`` of a job that is
    not running, ``depends`` of a job not waiting on dependencies."""


class HasDependents(ScriptError):
    """A job outside the call depends on a job being cancelled (qless-core: ``... is a
    dependency of ... but is not mentioned to be canceled``)."""


class BulkError(_BulkError, QlessError):
    """A pipeline did not succeed for every command (see :class:`jobwire.errors.BulkError`).

    ``.results`` has one entry per command, in order: its reply, or the exception it ended
    with: a :class:`RedisError` (its own error reply: every reply was read, the connection is
    usable), ``ConnectionLost`` or ``OperationTimeout`` (sent, no reply: it may or may not have
    run), ``NotSent`` (never sent). ``.error`` is the first of them, ``.index`` its command,
    ``.done`` the ``(index, reply)`` of every command that succeeded.
    """


_AUTH_CODES = frozenset({"NOAUTH", "WRONGPASS"})


#: ``retry``/``complete``/``heartbeat``: a job that is not running is a lock lost.
_LOCK_CALLS = frozenset({"Complete", "Retry", "Heartbeat"})


def _script_error_class(text: str, command: str) -> type[ScriptError]:
    """The typed error for qless-core's message ``text`` from its function ``command``."""
    if "does not exist" in text or text.startswith("Recur(): No recurring job"):
        return JobNotFound
    if "another worker" in text:
        return LostLock
    if "not currently running" in text:
        return LostLock if command in _LOCK_CALLS else WrongState
    if "not running" in text or "not in the depends state" in text:
        return WrongState
    if "is a dependency of" in text:
        return HasDependents
    if 'is in queue "' in text or "not in queue" in text:
        return WrongQueue
    return ScriptError


def error_for(message: str) -> RedisError:
    """The exception for an error reply carrying ``message``."""
    code = message.split(" ", 1)[0]
    if code in _AUTH_CODES:
        return AuthenticationError(message)
    if "user_script:" in message:
        error = ScriptError(message)
        cls = _script_error_class(error.text, error.command)
        return error if cls is ScriptError else cls(message)
    return RedisError(message)
