"""Build the fuzz seed corpus, ``tests/fuzz/corpus/<protocol>/``, from real-server recordings.

    .venv/bin/python tests/fuzz/make_corpus.py            # rewrite the corpus
    .venv/bin/python tests/fuzz/make_corpus.py --check    # exit 1 if it is out of date

Every exchange becomes two files, ``NN-<slug>.client`` (the bytes the client sent) and
``NN-<slug>.server`` (the bytes the server sent back; empty when it only closed the connection):

* beanstalk, gearman, workq: one pair per line of ``tests/transcripts/*.jsonl`` (recorded from
  beanstalkd 1.12, gearmand 1.1.20 and Workq 0.2.0). Gearman pairs are named ``text-*`` (admin
  protocol) or ``binary-*`` (packets).
* resp: recorded here and now from the local ``redis-server`` (7.x), started on a free loopback
  port with the DEBUG command enabled, so every RESP2 and RESP3 type is in it (``DEBUG PROTOCOL``
  gives attributes, big numbers, verbatim strings...). Without ``redis-server`` the resp files
  are left as they are (and ``--check`` skips them).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from jobwire.testing import wait_listening

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
TRANSCRIPTS = HERE.parent / "transcripts"
SOURCES = {
    "beanstalk": "beanstalkd-1.12.jsonl",
    "gearman": "gearmand-1.1.20.jsonl",
    "workq": "workq-0.2.0.jsonl",
}

#: RESP exchanges: (note, commands sent together, RESP version of the connection). Each runs on
#: its own fresh connection (after HELLO 3 for RESP3; its reply is recorded too).
RESP_EXCHANGES: list[tuple[str, list[list[bytes]], int]] = [
    ("ping and simple strings", [[b"PING"], [b"SET", b"k", b"v"], [b"ECHO", b"hi\r\nthere"]], 2),
    ("get, missing key (null bulk), empty string", [[b"GET", b"k"], [b"GET", b"nope"],
                                                    [b"SET", b"e", b""], [b"GET", b"e"]], 2),
    ("integers, negative and 64-bit", [[b"INCRBY", b"n", b"-5"],
                                       [b"INCRBY", b"n", b"9223372036854775800"],
                                       [b"DEL", b"n"]], 2),
    ("arrays, nested and empty", [[b"RPUSH", b"l", b"a", b"b\r\n", b""],
                                  [b"LRANGE", b"l", b"0", b"-1"],
                                  [b"LRANGE", b"none", b"0", b"-1"],
                                  [b"EVAL", b"return {1, {2, {'x', 3}}, 'y'}", b"0"]], 2),
    ("null array and errors", [[b"BLPOP", b"nolist", b"0.01"], [b"LPUSH", b"k", b"x"],
                               [b"NOSUCHCOMMAND"], [b"EVAL", b"return redis.error_reply('MY err')",
                                                    b"0"]], 2),
    ("transaction with an error inside EXEC", [[b"MULTI"], [b"SET", b"t", b"1"],
                                               [b"LPUSH", b"t", b"x"], [b"EXEC"]], 2),
    ("HELLO 3, maps, sets, doubles", [[b"HSET", b"h", b"f", b"1", b"g", b"2"],
                                                [b"HGETALL", b"h"], [b"SADD", b"s", b"a", b"b"],
                                                [b"SMEMBERS", b"s"], [b"ZADD", b"z", b"1.5", b"m"],
                                                [b"ZSCORE", b"z", b"m"], [b"GET", b"nope"]], 3),
    ("booleans, nulls and nested script tables", [
        [b"EVAL", b"redis.setresp(3); return {true, false, {double=3.5}}", b"0"],
        [b"EVAL", b"redis.setresp(3); return redis.call('HGETALL', KEYS[1])", b"1", b"h"],
        [b"EXISTS", b"h"]], 3),
    ("DEBUG PROTOCOL: every type", [[b"DEBUG", b"PROTOCOL", kind] for kind in (
        b"string", b"integer", b"double", b"bignum", b"null", b"array", b"set", b"map",
        b"attrib", b"push", b"verbatim", b"true", b"false")], 3),
    ("DEBUG PROTOCOL: the same types in RESP2", [[b"DEBUG", b"PROTOCOL", kind] for kind in (
        b"double", b"bignum", b"null", b"set", b"map", b"attrib", b"verbatim", b"true")], 2),
    ("client tracking: an invalidation push", [[b"CLIENT", b"TRACKING", b"on"],
                                                      [b"GET", b"tk"], [b"SET", b"tk", b"1"],
                                                      [b"PING"]], 3),
    ("a bulk string of CRLFs", [[b"SET", b"big", b"\r\n" * 1500], [b"GET", b"big"]], 2),
    ("INFO as a verbatim string", [[b"INFO", b"keyspace"]], 3),
    ("wrong number of arguments and WRONGTYPE", [[b"GET"], [b"HGETALL", b"l"]], 2),
]


def slug(note: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", note.lower()).strip("-")[:48].rstrip("-")


def transcript_pairs(protocol: str) -> Iterator[tuple[str, bytes, bytes]]:
    """(file stem, client bytes, server bytes) for each line of a protocol's transcript."""
    lines = (TRANSCRIPTS / SOURCES[protocol]).read_text().splitlines()
    for i, text in enumerate(lines, 1):
        entry = json.loads(text)
        if "send_hex" in entry:
            sent, got = bytes.fromhex(entry["send_hex"]), bytes.fromhex(entry["recv_hex"])
        else:
            sent, got = entry["send"].encode("latin-1"), entry["recv"].encode("latin-1")
        if got == b"<EOF>":  # the server closed the connection without a reply
            got = b""
        prefix = f"{entry['kind']}-" if "kind" in entry else ""
        yield f"{i:02d}-{prefix}{slug(entry['note'])}", sent, got


def _resp_encode(args: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _read_until_quiet(sock: socket.socket, quiet: float = 0.3) -> bytes:
    """Everything the server sends until it has been silent for ``quiet`` seconds."""
    chunks: list[bytes] = []
    sock.settimeout(quiet)
    while True:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            return b"".join(chunks)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


def resp_pairs() -> Iterator[tuple[str, bytes, bytes]] | None:
    """Record :data:`RESP_EXCHANGES` from a fresh local redis-server, or None without one."""
    binary = shutil.which("redis-server")
    if binary is None:
        return None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    workdir = tempfile.mkdtemp(prefix="jobwire-corpus-")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--enable-debug-command", "yes", "--dir", workdir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    out: list[tuple[str, bytes, bytes]] = []
    try:
        wait_listening(proc, ("127.0.0.1", port), "redis-server", timeout=10)
        for i, (note, commands, version) in enumerate(RESP_EXCHANGES, 1):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sent = _resp_encode([b"HELLO", b"3"]) if version == 3 else b""
                sent += b"".join(_resp_encode(c) for c in commands)
                sock.sendall(sent)
                got = _read_until_quiet(sock)
            out.append((f"{i:02d}-resp{version}-{slug(note)}", sent, got))
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
    return iter(out)


def wanted() -> dict[str, dict[str, bytes]]:
    """protocol -> file name -> content, for every protocol that can be built here."""
    files: dict[str, dict[str, bytes]] = {}
    sources: dict[str, Iterator[tuple[str, bytes, bytes]] | None] = {
        p: transcript_pairs(p) for p in SOURCES
    }
    sources["resp"] = resp_pairs()
    for protocol, pairs in sources.items():
        if pairs is None:
            print(f"{protocol}: redis-server not found, left as it is", file=sys.stderr)
            continue
        files[protocol] = {}
        for stem, sent, got in pairs:
            files[protocol][f"{stem}.client"] = sent
            files[protocol][f"{stem}.server"] = got
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report differences")
    args = parser.parse_args()
    stale = 0
    for protocol, files in wanted().items():
        folder = CORPUS / protocol
        have = {p.name: p.read_bytes() for p in folder.glob("*.*")} if folder.is_dir() else {}
        if protocol == "resp" and args.check:
            # Recorded live: server values (ids, uptimes, versions) change from run to run, so
            # only the list of files is compared.
            have = dict.fromkeys(have, b"")
            files = dict.fromkeys(files, b"")
        if have == files:
            continue
        stale += 1
        if args.check:
            print(f"{protocol}: corpus out of date ({folder})")
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for name in set(have) - set(files):
            (folder / name).unlink()
        for name, content in files.items():
            (folder / name).write_bytes(content)
        print(f"{protocol}: {len(files) // 2} pairs written to {folder}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
