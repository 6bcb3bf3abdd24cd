"""The clients' job ids (``jobwire._ids``): made a batch at a time, never handed out twice, not
even by a forked child (whose parent still holds the rest of the batch)."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable

import pytest

from jobwire._ids import BATCH, pooled, uuid4_hex
from qless_client import new_jid
from workq_client._commands import new_id


def test_hex_ids_are_uuid4s() -> None:
    ids = uuid4_hex(3 * BATCH) + [new_jid() for _ in range(3 * BATCH)]
    assert len(set(ids)) == len(ids) and uuid4_hex(0) == []
    for jid in ids:
        parsed = uuid.UUID(hex=jid)
        assert (parsed.version, parsed.variant, parsed.hex) == (4, uuid.RFC_4122, jid)


def test_a_pool_hands_each_id_out_once_across_threads() -> None:
    made: list[int] = []

    def make(count: int) -> list[str]:
        made.append(count)
        return uuid4_hex(count)

    take = pooled(make)
    taken: list[list[str]] = [[] for _ in range(4)]

    def run(out: list[str]) -> None:
        for _ in range(5 * BATCH):
            out.append(take())

    threads = [threading.Thread(target=run, args=(out,)) for out in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [job_id for out in taken for job_id in out]
    assert len(ids) == len(set(ids)) == 20 * BATCH
    assert made and set(made) == {BATCH}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("take", [new_id, new_jid], ids=["workq", "qless"])
def test_a_forked_child_never_hands_out_its_parents_ids(take: Callable[[], str]) -> None:
    take()  # the parent holds the rest of a batch now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, " ".join(take() for _ in range(BATCH)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    os.waitpid(pid, 0)
    parent = [take() for _ in range(BATCH)]
    assert len(child) == BATCH and not set(child) & set(parent)
