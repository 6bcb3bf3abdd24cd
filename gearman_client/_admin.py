"""The Gearman text admin protocol (same port as the binary one) as a Sans-IO core, with typed
records for its list replies.

A server tells the two protocols apart by the first byte of a message: NUL starts a binary
packet, anything else a text command line. What gearmand 1.1.20 really sends (docs/gearman.md, the
recorded transcript) is looser than the document, so the reader here is tolerant where the
server is sloppy and strict where it matters:

* lines end in ``\\n`` or ``\\r\\n`` (``OK\\r\\n`` and ``OK x\\n`` both occur); a lone ``\\r``
  before the ``\\n`` is dropped;
* list replies (``workers``, ``status``, ``prioritystatus``, ``show jobs``, ``show unique jobs``)
  end with a line holding a single ``.``; an empty list is a bare ``.``;
* ``ERR CODE text`` is an error (gearmand writes spaces in the text as ``+``); some of
  gearmand's errors have no code, only words (``ERR function not found``, ``ERR there are still
  connected workers or executing clients``): an ``ERR`` whose first word is not an upper-case
  code gives :class:`AdminError` with an empty ``code`` and the whole text; ``OK [text]`` a
  success;
* a line is at most :data:`MAX_LINE` bytes, so a peer that never sends ``\\n`` cannot grow memory
  without bound; a list reply is at most ``max_list_lines`` lines and ``max_list_size`` bytes
  (:data:`MAX_LIST_LINES`, :data:`MAX_LIST_SIZE`), so a peer that never sends the final ``.``
  cannot either: past a cap the connection raises ``RemoteProtocolError`` at once.

Commands are sent ending in ``\\r\\n``, as gearadmin sends them: gearmand 1.1.20 stores ``create
function nf\\n`` as the function ``n`` (it drops the character before the ``\\n``), and
``nf\\r\\n`` as ``nf``. Names sent in commands may not contain whitespace or control
characters: a function named ``"x\\nshutdown"`` would otherwise run a second command (command
injection). The binary protocol refuses the same in function names (``_packets.check_name``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from jobwire._buffer import ReceiveBuffer
from jobwire._core import ConnectionState, InOrderClientCore
from jobwire._numbers import parse_int, parse_uint
from jobwire._record import record
from jobwire.errors import LocalProtocolError, RemoteProtocolError

from ._events import NEED_DATA, ConnectionClosed, NeedData

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from typing import ClassVar

__all__ = [
    "MAX_LINE",
    "MAX_LIST_LINES",
    "MAX_LIST_SIZE",
    "AdminCommand",
    "AdminConnection",
    "AdminError",
    "AdminList",
    "AdminOk",
    "AdminReply",
    "CancelJob",
    "CreateFunction",
    "DropFunction",
    "FunctionStatus",
    "GetPid",
    "JobInfo",
    "MaxQueue",
    "PriorityStatus",
    "PriorityStatusCommand",
    "ShowJobs",
    "ShowUniqueJobs",
    "Shutdown",
    "Status",
    "Verbose",
    "Version",
    "WorkerInfo",
    "Workers",
    "extract_text_line",
    "parse_jobs",
    "parse_priority_status",
    "parse_status",
    "parse_workers",
]

#: Longest admin line accepted (either direction), terminator included.
MAX_LINE = 1 << 16
#: Most lines accepted in one list reply by default (``show jobs`` of a million jobs).
MAX_LIST_LINES = 1_000_000
#: Most bytes accepted in one list reply by default, line ends included (``show jobs`` lines
#: of gearmand 1.1.20 are about 25 bytes: over 600,000 jobs).
MAX_LIST_SIZE = 16 * 1024 * 1024


class LineTooLong(RemoteProtocolError):
    """A text line exceeded :data:`MAX_LINE`."""


def extract_text_line(buf: ReceiveBuffer, limit: int = MAX_LINE) -> bytes | None:
    """Remove and return the next ``\\n``-terminated line without ``\\n`` or a ``\\r`` before it.

    Returns ``None`` while the line is incomplete. Looks at a growing window so a long buffer of
    many short lines costs O(line) per line.

    Raises:
        LineTooLong: the line (or the incomplete rest) is longer than ``limit``.
    """
    n = len(buf)
    size = min(n, 256)
    while size:
        chunk = buf.peek(size)
        assert chunk is not None
        idx = chunk.find(b"\n")
        if idx >= 0:
            if idx + 1 > limit:
                raise LineTooLong(f"admin line of {idx + 1} bytes, over {limit}")
            buf.discard(idx + 1)
            return chunk[: idx - 1] if idx and chunk[idx - 1] == 13 else chunk[:idx]
        if size >= n:
            break
        size = min(n, size * 4)
    if n >= limit:
        raise LineTooLong(f"admin line of at least {n} bytes, over {limit}")
    return None


def _check_word(value: str, what: str) -> str:
    if not isinstance(value, str):
        raise LocalProtocolError(f"{what} must be a str, got {type(value).__name__}")
    if not value:
        raise LocalProtocolError(f"{what} must not be empty")
    if any(c.isspace() or c < " " or c == "\x7f" for c in value):
        raise LocalProtocolError(
            f"{what} must not contain whitespace or control characters: {value[:40]!r}"
        )
    try:
        size = len(value.encode())
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 for it
        raise LocalProtocolError(f"{what} is not encodable as UTF-8: {value[:40]!r}") from None
    if size > 1024:
        raise LocalProtocolError(f"{what} is too long")
    return value


# -- commands -----------------------------------------------------------------------------------


class AdminCommand:
    """Base of the admin commands. ``LIST`` says whether the reply is a ``.``-terminated list."""

    __slots__ = ()
    LIST: ClassVar[bool] = False

    def words(self) -> list[str]:
        raise NotImplementedError

    def encode(self) -> bytes:
        """The command line, ``\\r\\n``-terminated as gearadmin sends it (gearmand 1.1.20 cuts
        the last character off a ``create function`` line that ends in a bare ``\\n``)."""
        return " ".join(self.words()).encode() + b"\r\n"


@record
class Workers(AdminCommand):
    """``workers``: every connection, its id and functions."""

    LIST: ClassVar[bool] = True

    def words(self) -> list[str]:
        return ["workers"]


@record
class Status(AdminCommand):
    """``status``: queued, running and workers per function."""

    LIST: ClassVar[bool] = True

    def words(self) -> list[str]:
        return ["status"]


@record
class PriorityStatusCommand(AdminCommand):
    """``prioritystatus``: queued jobs per priority per function."""

    LIST: ClassVar[bool] = True

    def words(self) -> list[str]:
        return ["prioritystatus"]


@record
class ShowJobs(AdminCommand):
    """``show jobs``: every job handle with its retries and flags."""

    LIST: ClassVar[bool] = True

    def words(self) -> list[str]:
        return ["show", "jobs"]


@record
class ShowUniqueJobs(AdminCommand):
    """``show unique jobs``: the unique id of every job (empty ones included)."""

    LIST: ClassVar[bool] = True

    def words(self) -> list[str]:
        return ["show", "unique", "jobs"]


@record
class CancelJob(AdminCommand):
    """``cancel job HANDLE``: remove a queued (not running) job."""

    handle: str

    def words(self) -> list[str]:
        return ["cancel", "job", _check_word(self.handle, "handle")]


@record
class CreateFunction(AdminCommand):
    """``create function F``."""

    function: str

    def words(self) -> list[str]:
        return ["create", "function", _check_word(self.function, "function")]


@record
class DropFunction(AdminCommand):
    """``drop function F`` (refused while it has jobs or workers)."""

    function: str

    def words(self) -> list[str]:
        return ["drop", "function", _check_word(self.function, "function")]


@record
class MaxQueue(AdminCommand):
    """``maxqueue F [N | HIGH NORMAL LOW]``: limit the queue (0 or negative: no limit)."""

    function: str
    sizes: tuple[int, ...] = ()

    def words(self) -> list[str]:
        if len(self.sizes) not in (0, 1, 3):
            raise LocalProtocolError("maxqueue takes no size, one size, or three sizes")
        for size in self.sizes:
            if not isinstance(size, int) or isinstance(size, bool) or abs(size) >= 1 << 31:
                raise LocalProtocolError(f"maxqueue size must be a 32-bit int, got {size!r}")
        return ["maxqueue", _check_word(self.function, "function"), *map(str, self.sizes)]


@record
class GetPid(AdminCommand):
    """``getpid``: the server's process id."""

    def words(self) -> list[str]:
        return ["getpid"]


@record
class Verbose(AdminCommand):
    """``verbose``: the server's log level name."""

    def words(self) -> list[str]:
        return ["verbose"]


@record
class Version(AdminCommand):
    """``version``: the server's version string."""

    def words(self) -> list[str]:
        return ["version"]


@record
class Shutdown(AdminCommand):
    """``shutdown [graceful]`` (not in gearmand 1.1.20: it answers ERR UNKNOWN_COMMAND)."""

    graceful: bool = False

    def words(self) -> list[str]:
        return ["shutdown", "graceful"] if self.graceful else ["shutdown"]


# -- replies ------------------------------------------------------------------------------------


class AdminReply:
    """Base of the admin replies."""

    __slots__ = ()


@record
class AdminOk(AdminReply):
    """``OK [text]``."""

    text: str = ""


@record
class AdminList(AdminReply):
    """The lines of a list reply, without the final ``.``."""

    lines: tuple[bytes, ...]


@record
class AdminError(AdminReply):
    """``ERR CODE text`` (``+`` in the text turned back into spaces), or ``ERR words`` without a
    code (``code`` is then ``""`` and ``message`` the words as sent)."""

    code: str
    message: str = ""


def _is_code(word: str) -> bool:
    """gearmand's error codes are upper-case words: ``UNKNOWN_JOB``, ``INVALID_ARGUMENTS``."""
    return bool(word) and word.isascii() and all(c.isupper() or c.isdigit() or c == "_"
                                                 for c in word)


def _parse_single(line: bytes) -> AdminReply:
    text = line.decode("utf-8", "replace")
    if text == "OK" or text.startswith("OK "):
        return AdminOk(text[3:])
    if text == "ERR" or text.startswith("ERR "):
        rest = text[4:]
        code, _, message = rest.partition(" ")
        if not _is_code(code):  # "ERR function not found": words only
            return AdminError("", rest)
        return AdminError(code, message.replace("+", " "))
    raise RemoteProtocolError(f"admin reply is neither OK nor ERR: {line[:60]!r}")


class _Step(enum.Enum):
    """What the parser reads next."""

    REPLY = 0  # a reply's first line (a whole single reply, or a list's first line)
    LIST = 1  # the next line of a list reply (a line, or the final ``.``)


class AdminConnection(InOrderClientCore):
    """The client side of an admin connection: commands in, bytes out; bytes in, replies out.

    On the shared in-order core (buffer, FIFO of commands awaiting replies, end of input,
    poisoning). Replies come in the order of the commands; each is parsed according to its
    command (a list until ``.``, or a single ``OK``/``ERR`` line; a list command answered
    ``ERR ...`` gives :class:`AdminError`). ``next_event()`` returns ``(command, reply)``,
    :class:`ConnectionClosed` once after EOF (then :data:`NEED_DATA`), or :data:`NEED_DATA`. It
    raises ``RemoteProtocolError`` for a line too long, a list past ``max_list_lines`` or
    ``max_list_size``, a reply nobody asked for, or a line that is neither OK nor ERR: the
    connection is poisoned.

    Args:
        max_list_lines: most lines accepted in one list reply.
        max_list_size: most bytes accepted in one list reply (line ends included).
        A list that goes past either before its ``.`` raises ``RemoteProtocolError``.
    """

    __slots__ = ("_lines", "_size", "_step", "max_list_lines", "max_list_size")

    def __init__(
        self, *, max_list_lines: int = MAX_LIST_LINES, max_list_size: int = MAX_LIST_SIZE
    ) -> None:
        super().__init__()
        self.max_list_lines = max_list_lines
        self.max_list_size = max_list_size
        self._step = _Step.REPLY
        self._lines: list[bytes] = []  # in step LIST: the list's lines so far
        self._size = 0  # bytes of ``_lines``, line ends included

    def send(self, command: AdminCommand) -> bytes:
        """Validate and encode ``command``.

        Raises:
            LocalProtocolError: a name with whitespace or control characters, a bad maxqueue
                size, or the connection is closed.
            RemoteProtocolError: the connection is poisoned (the error again).
        """
        if self._state is not ConnectionState.OPEN:
            if self._error is not None:
                raise type(self._error)(str(self._error))
            self._check_open(type(command).__name__)
        data = command.encode()
        self._pending.append(command)
        return data

    if TYPE_CHECKING:  # the shared core's, with this core's events

        def next_event(self) -> tuple[AdminCommand, AdminReply] | ConnectionClosed | NeedData: ...

    def _closed(self) -> ConnectionClosed | NeedData:
        if self._state is ConnectionState.CLOSED:
            return NEED_DATA  # reported once
        self._state = ConnectionState.CLOSED
        return ConnectionClosed(
            len(self._pending), bool(self._buffer) or self._step is _Step.LIST
        )

    def _next_event(self) -> tuple[AdminCommand, AdminReply] | ConnectionClosed | NeedData:
        while True:
            line = extract_text_line(self._buffer)
            if line is None:
                return self._closed() if self._eof else NEED_DATA
            reply = _READERS[self._step](self, line)
            if reply is not None:
                return self._pending.popleft(), reply

    def _read_reply(self, line: bytes) -> AdminReply | None:
        """Step REPLY: a single reply, or a list's first line (an ``ERR``, the ``.`` of an
        empty list, or its first entry: then step LIST)."""
        if not self._pending:
            raise RemoteProtocolError(f"admin line with no command waiting: {line[:60]!r}")
        if not self._pending[0].LIST or line.startswith(b"ERR "):
            return _parse_single(line)
        self._step = _Step.LIST
        return self._read_list(line)

    def _read_list(self, line: bytes) -> AdminList | None:
        """Step LIST: a list entry, or the final ``.`` (then step REPLY)."""
        if line == b".":
            lines, self._lines, self._size = tuple(self._lines), [], 0
            self._step = _Step.REPLY
            return AdminList(lines)
        self._size += len(line) + 1
        if len(self._lines) >= self.max_list_lines or self._size > self.max_list_size:
            command = self._pending[0]
            raise RemoteProtocolError(
                f"{' '.join(command.words())} reply goes on past max_list_lines="
                f"{self.max_list_lines} or max_list_size={self.max_list_size} bytes "
                "without its final '.'"
            )
        self._lines.append(line)
        return None


#: The reader of each step (h11's shape: a table from state to reader).
_READERS: dict[_Step, Callable[[AdminConnection, bytes], AdminReply | None]] = {
    _Step.REPLY: AdminConnection._read_reply,
    _Step.LIST: AdminConnection._read_list,
}


# -- typed records for the list replies ---------------------------------------------------------


def _num(raw: bytes, line: bytes) -> int:
    return parse_int(raw, f"a number in admin line {line[:80]!r}")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


@record
class WorkerInfo:
    """One entry of ``workers``: ``FD IP CLIENT-ID : FUNCTION ...``. Every connection is listed,
    clients and admin connections too; ``client_id`` is ``-`` when the connection never sent
    SET_CLIENT_ID, and otherwise as sent (gearmand 1.1.20 prints it verbatim: it may be empty
    or hold spaces, colons, control characters, even a newline)."""

    fd: int
    address: str
    client_id: str
    functions: tuple[str, ...]


@record
class FunctionStatus:
    """One line of ``status``: jobs queued in total (running ones included), running, and the
    number of workers that can run the function."""

    function: str
    queued: int
    running: int
    workers: int


@record
class PriorityStatus:
    """One line of ``prioritystatus``: queued jobs per priority, and capable workers."""

    function: str
    high: int
    normal: int
    low: int
    workers: int


@record
class JobInfo:
    """One line of ``show jobs``: handle, retries, whether the job is ignored, whether queued."""

    handle: bytes
    retries: int
    ignore_job: bool
    queued: bool


def _entry_start(line: bytes) -> bool:
    """Whether ``line`` starts a ``workers`` entry (``FD IP ``), rather than continuing the
    previous one after a newline inside a client id."""
    fd, sep, rest = line.partition(b" ")
    return bool(sep) and fd.isdigit() and b" " in rest


def _separator(rest: bytes) -> int:
    """Where the `` :`` before the functions starts in ``ID : F1 F2`` (``rest``): the last
    `` :`` followed by a space or the end. The id is printed verbatim and may itself hold
    `` : `` (``a : b : f`` is id ``a : b``), so the last one is taken; a function name holding
    `` : `` is then misread, but function names are split on spaces anyway."""
    end = len(rest)
    while (i := rest.rfind(b" :", 0, end)) >= 0:
        if i + 2 == len(rest) or rest[i + 2] == 0x20:
            return i
        end = i + 1
    return -1


def parse_workers(lines: tuple[bytes, ...]) -> list[WorkerInfo]:
    """Parse the lines of a ``workers`` reply.

    gearmand prints each client id as it was sent, so ids with spaces, colons, `` : `` or an
    empty id parse (functions follow the last `` :``), and an id with a newline in it, which
    breaks its entry over two lines, is joined back (a line that does not start ``FD IP `` goes
    with the one before). An id containing ``\\n.\\n`` ends gearmand's list early: no reader can
    tell that apart from the real end.

    Raises:
        RemoteProtocolError: an entry without ``FD IP ID :``.
    """
    pieces: list[list[bytes]] = []
    for line in lines:
        if pieces and not _entry_start(line):
            pieces[-1].append(line)  # joined once below: linear however many lines
        else:
            pieces.append([line])
    out = []
    for entry in map(b"\n".join, pieces):
        fd, _, rest = entry.partition(b" ")
        address, _, rest = rest.partition(b" ")
        cut = _separator(rest)
        if not address or cut < 0:
            raise RemoteProtocolError(f"bad workers line {entry[:80]!r}")
        functions = rest[cut + 2 :].split(b" ")
        out.append(WorkerInfo(parse_uint(fd, "a workers fd"), _text(address), _text(rest[:cut]),
                              tuple(_text(f) for f in functions if f)))
    return out


def _tabbed(lines: tuple[bytes, ...], columns: int, what: str) -> list[tuple[str, list[int]]]:
    out = []
    for line in lines:
        parts = line.rsplit(b"\t", columns - 1)
        if len(parts) != columns:
            raise RemoteProtocolError(f"bad {what} line {line[:80]!r}")
        out.append((_text(parts[0]), [_num(p, line) for p in parts[1:]]))
    return out


def parse_status(lines: tuple[bytes, ...]) -> list[FunctionStatus]:
    """Parse a ``status`` reply (``FUNCTION\\tTOTAL\\tRUNNING\\tWORKERS`` lines)."""
    return [FunctionStatus(f, *n) for f, n in _tabbed(lines, 4, "status")]


def parse_priority_status(lines: tuple[bytes, ...]) -> list[PriorityStatus]:
    """Parse a ``prioritystatus`` reply (``FUNCTION\\tHIGH\\tNORMAL\\tLOW\\tWORKERS`` lines)."""
    return [PriorityStatus(f, *n) for f, n in _tabbed(lines, 5, "prioritystatus")]


def parse_jobs(lines: tuple[bytes, ...]) -> list[JobInfo]:
    """Parse a ``show jobs`` reply (``HANDLE\\tRETRIES\\tIGNORE\\tQUEUED`` lines)."""
    out = []
    for line in lines:
        parts = line.split(b"\t")
        if len(parts) != 4:
            raise RemoteProtocolError(f"bad show jobs line {line[:80]!r}")
        retries, ignore, queued = (_num(p, line) for p in parts[1:])
        out.append(JobInfo(parts[0], retries, bool(ignore), bool(queued)))
    return out
