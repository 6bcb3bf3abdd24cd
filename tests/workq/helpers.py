"""Small real servers that misbehave, for the clients' error paths (real sockets, no mocks)."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field


@contextmanager
def tcp_server(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """Accept connections on a free loopback port and run ``handle`` on each in a thread."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    stop = threading.Event()
    conns: list[socket.socket] = []

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conns.append(conn)
            threading.Thread(target=_run, args=(handle, conn), daemon=True).start()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        listener.close()
        for conn in conns:
            conn.close()


def _run(handle: Callable[[socket.socket], None], conn: socket.socket) -> None:
    with suppress(OSError):
        handle(conn)


def silent(conn: socket.socket) -> None:
    """Read and never answer."""
    while conn.recv(65536):
        pass


def replies(data: bytes, close: bool = False) -> Callable[[socket.socket], None]:
    """Answer the first command with ``data`` (then close, if asked)."""

    def handle(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(data)
        if close:
            conn.shutdown(socket.SHUT_RDWR)
            conn.close()
            return
        while conn.recv(65536):
            pass

    return handle


# -- a peer that reads like the real Workq 0.2.0 server -------------------------------------------
#
# The real server is not packaged here, so the two behaviours of Workq 0.2.0 that a client must
# live with (docs/workq.md, "Where it differs from Workq 0.2.0, on purpose") are
# modelled here as the Go source does them, and only them:
#
# * int/client: each connection reads through Go's ``bufio.Reader`` (4096 bytes) over an
#   ``io.LimitedReader`` (1,058,576 bytes, reset before each command). int/prot ``ParseCmd`` reads
#   a line with ``ReadBytes('\n')`` (no CR before the LF, or end of input: close), then
#   ``readPayload`` reads the payload with ``io.ReadAtLeast`` and its CRLF with ONE ``Read`` of 2
#   bytes: when the buffer holds only the CR, that read returns 1 byte and the server answers
#   ``-CLIENT-ERROR Invalid payload size``; the LF left over is then read as a line shorter than
#   CRLF, and the server closes the connection (int/server ``clientLoop``).
# * A waiting ``lease`` does not read its connection, so it never notices that the client went
#   away: the next job added to one of its names is leased to it (attempts 1) all the same.
#
# It answers ``add``, ``lease``, ``complete`` and ``fail``; anything else gets ``-SERVER-ERROR``.
# There is no TTR clock: a job leased to a connection stays leased, which is what the tests look
# for.

_BUF_SIZE = 4096  # bufio.defaultBufSize
_MAX_READ = 1058576  # prot.MaxRead
_MAX_PAYLOAD = 1048576


class _Arrivals:
    """The socket as the Go server sees it: a thread reads it the moment bytes arrive, and each
    ``Read`` returns at most one arrival (the Go server, unlike this Python model, keeps up with
    a pipelining client, so its reads end where the client's bytes stopped arriving)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.chunks: deque[bytes] = deque()
        self.cond = threading.Condition()
        self.eof = False
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except OSError:
                data = b""
            with self.cond:
                if data:
                    self.chunks.append(data)
                else:
                    self.eof = True
                self.cond.notify_all()
            if not data:
                return

    def read(self, n: int) -> bytes:
        """One ``conn.Read`` of at most ``n`` bytes (``b""``: end of input)."""
        with self.cond:
            while not self.chunks and not self.eof:
                self.cond.wait()
            if not self.chunks:
                return b""
            head = self.chunks.popleft()
            if len(head) > n:
                self.chunks.appendleft(head[n:])
                head = head[:n]
            return head

    def unread(self) -> bool:
        with self.cond:
            return bool(self.chunks)


class _GoReader:
    """``bufio.NewReader(&io.LimitedReader{R: conn, N: MaxRead})``, as Go implements it."""

    def __init__(self, sock: socket.socket) -> None:
        self.conn = _Arrivals(sock)
        self.buf = bytearray(_BUF_SIZE)
        self.r = self.w = 0
        self.eof = False  # bufio's sticky b.err (here always end of input or a reset)
        self.limit = _MAX_READ

    def reset_limit(self) -> None:
        self.limit = _MAX_READ

    def _raw(self, n: int) -> bytes:
        """One ``LimitedReader.Read`` of at most ``n`` bytes (``b""``: EOF)."""
        if self.limit <= 0:
            return b""
        data = self.conn.read(min(n, self.limit))
        self.limit -= len(data)
        return data

    def unread(self) -> bool:
        """Bytes the client sent that the server has not read (closing then sends a reset)."""
        return self.r < self.w or self.conn.unread()

    def _fill(self) -> None:
        if self.r > 0:  # slide existing data to the beginning
            self.buf[: self.w - self.r] = self.buf[self.r : self.w]
            self.w -= self.r
            self.r = 0
        data = self._raw(_BUF_SIZE - self.w)
        if not data:
            self.eof = True
            return
        self.buf[self.w : self.w + len(data)] = data
        self.w += len(data)

    def read_line(self) -> bytes | None:
        """``ReadBytes('\\n')``: the line with its LF, or None at end of input."""
        out = bytearray()
        while True:  # ReadSlice, again after each ErrBufferFull (collectFragments)
            i = self.buf.find(b"\n", self.r, self.w)
            if i >= 0:
                out += self.buf[self.r : i + 1]
                self.r = i + 1
                return bytes(out)
            if self.eof:
                return None
            if self.w - self.r >= _BUF_SIZE:
                out += self.buf[self.r : self.w]
                self.r = self.w
            self._fill()

    def read(self, n: int) -> bytes:
        """``Read(p)`` with ``len(p) == n``: at most one read from below; may return less."""
        if self.r == self.w:
            if self.eof:
                return b""
            if n >= _BUF_SIZE:  # large read, empty buffer: straight into p
                data = self._raw(n)
                if not data:
                    self.eof = True
                return data
            self.r = self.w = 0
            data = self._raw(_BUF_SIZE)
            if not data:
                self.eof = True
                return b""
            self.buf[: len(data)] = data
            self.w = len(data)
        taken = min(n, self.w - self.r)
        out = bytes(self.buf[self.r : self.r + taken])
        self.r += taken
        return out

    def read_payload(self, size: int) -> bytes | None:
        """int/prot ``readPayload``: the payload, or None for ``Invalid payload size``."""
        if size < 0 or size > _MAX_PAYLOAD:
            return None
        payload = bytearray()
        while len(payload) < size:  # io.ReadAtLeast
            chunk = self.read(size - len(payload))
            if not chunk:
                break
            payload += chunk
        if len(payload) < size and not payload:
            return None
        term = self.read(2)  # the one 2-byte read
        if term != b"\r\n":
            return None
        return bytes(payload)


@dataclass
class PeerJob:
    job_id: str
    name: str
    ttr: int
    payload: bytes
    attempts: int = 0
    state: str = "ready"  # ready, leased, completed, failed
    #: The connection number it was last leased to.
    leased_to: int | None = None


@dataclass
class RealishWorkq:
    """What the peer knows, for the tests to look at (guarded by ``cond``)."""

    port: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition)
    jobs: dict[str, PeerJob] = field(default_factory=dict)
    ready: dict[str, deque[str]] = field(default_factory=dict)
    #: Leases waiting now, by connection number.
    waiting: dict[int, int] = field(default_factory=dict)
    #: Connection numbers whose socket the client has closed (seen once the peer reads again).
    closed: set[int] = field(default_factory=set)
    errors: list[bytes] = field(default_factory=list)
    connections: int = 0

    def added(self, name: str) -> list[PeerJob]:
        with self.cond:
            return [job for job in self.jobs.values() if job.name == name]

    def waiting_leases(self) -> int:
        with self.cond:
            return sum(self.waiting.values())

    def _lease(self, conn_no: int, names: list[bytes], wait_ms: int) -> PeerJob | None:
        deadline = time.monotonic() + wait_ms / 1000
        with self.cond:
            self.waiting[conn_no] = self.waiting.get(conn_no, 0) + 1
            try:
                while True:
                    for raw in names:
                        queue = self.ready.get(raw.decode())
                        if queue:
                            job = self.jobs[queue.popleft()]
                            job.state, job.leased_to = "leased", conn_no
                            job.attempts += 1
                            return job
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    self.cond.wait(left)
            finally:
                self.waiting[conn_no] -= 1


def _realish_connection(state: RealishWorkq, conn: socket.socket) -> None:
    with state.cond:
        state.connections += 1
        conn_no = state.connections
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # Go's default for TCP
    reader = _GoReader(conn)
    try:
        while True:
            reader.reset_limit()
            reply = _realish_command(state, conn_no, reader)
            if reply is None:
                return
            try:
                conn.sendall(reply)
            except OSError:
                return
    finally:
        with state.cond:
            state.closed.add(conn_no)
        if reader.unread():  # as the kernel does when unread bytes are left: a reset
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()


def _realish_command(state: RealishWorkq, conn_no: int, reader: _GoReader) -> bytes | None:
    """ParseCmd + the handler: the reply to send, or None to close the connection."""
    line = reader.read_line()
    if line is None or len(line) < 2 or line[-2:-1] != b"\r":
        return None  # ErrReadErr: close
    tokens = [t for t in line[:-2].split(b" ") if t]
    args = [t for t in tokens if not (t.startswith(b"-") and b"=" in t)]
    verb = line[:-2].split(b" ")[0]
    payload_at = {b"add": (6, 5), b"schedule": (7, 6), b"run": (6, 5), b"complete": (3, 2),
                  b"fail": (3, 2)}
    payload = b""
    if verb in payload_at:
        argc, where = payload_at[verb]
        if len(args) != argc:
            return b"-CLIENT-ERROR Invalid command args\r\n"
        try:
            size = int(args[where])
        except ValueError:
            return b"-CLIENT-ERROR Invalid payload size\r\n"
        data = reader.read_payload(size)
        if data is None:
            with state.cond:
                state.errors.append(line)
            return b"-CLIENT-ERROR Invalid payload size\r\n"
        payload = data
    if verb == b"add":
        job_id, name = args[1].decode(), args[2].decode()
        with state.cond:
            if job_id in state.jobs:
                return b"-CLIENT-ERROR Duplicate job\r\n"
            state.jobs[job_id] = PeerJob(job_id, name, int(args[3]), payload)
            state.ready.setdefault(name, deque()).append(job_id)
            state.cond.notify_all()
        return b"+OK\r\n"
    if verb == b"lease":
        if len(args) < 3:
            return b"-CLIENT-ERROR Invalid command args\r\n"
        job = state._lease(conn_no, args[1:-1], int(args[-1]))
        if job is None:
            return b"-TIMEOUT\r\n"
        return b"+OK 1\r\n%s %s %d %d\r\n%s\r\n" % (
            job.job_id.encode(), job.name.encode(), job.ttr, len(job.payload), job.payload)
    if verb in (b"complete", b"fail"):
        with state.cond:
            job = state.jobs.get(args[1].decode())
            if job is None:
                return b"-NOT-FOUND\r\n"
            if job.state in ("completed", "failed"):
                return b"-CLIENT-ERROR Duplicate result\r\n"
            job.state = "completed" if verb == b"complete" else "failed"
        return b"+OK\r\n"
    return b"-SERVER-ERROR not modelled by this test peer\r\n"


@contextmanager
def realish_workq() -> Iterator[RealishWorkq]:
    """A peer on a free loopback port that reads and leases like Workq 0.2.0 (see above)."""
    state = RealishWorkq()
    with tcp_server(lambda conn: _realish_connection(state, conn)) as port:
        state.port = port
        yield state
