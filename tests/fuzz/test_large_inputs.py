"""Large inputs (what is checked: ``harness.py``, item 6): 16-512 KiB here, built by
:func:`harness.grow` from recorded exchanges, valid items holding a repeated piece, hostile
pieces and filler, fed to every role with its *default* caps in one piece and split at random
points into many ``receive_data`` calls. The long fuzzer (``scripts/fuzz``) feeds them up to
4 MiB; CI keeps to three examples per role (a few seconds in all).

And one reply's totals in RESP (``max_reply_items``, ``max_reply_bytes``): nesting empty
aggregates multiplies a reply in memory (8 MB of ``~0`` was two million Python sets), so the
harness counts what one reply holds at every NEED_DATA and once it is complete.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobwire.errors import RemoteProtocolError

from .harness import (
    LARGE_ROLES,
    RESP_CAPS,
    RESP_CLIENT,
    Role,
    check,
    grow,
    many_cuts,
    resp_tree,
)
from .strategies import fuzz_settings

ALL_LARGE = [role for roles in LARGE_ROLES.values() for role in roles]


@pytest.mark.parametrize("role", ALL_LARGE, ids=lambda r: r.name)
@fuzz_settings(3)
@given(material=st.binary(max_size=64), seed=st.integers(0, 2**32 - 1),
       size=st.integers(16 * 1024, 512 * 1024))
def test_large_inputs_whole_and_split(role: Role, material: bytes, seed: int, size: int) -> None:
    rng = random.Random(seed)
    data, context = grow(role, material, rng, size)
    assert len(data) >= size or len(data) > 0
    check(role, data, context, [many_cuts(data, rng)], bytewise_limit=0)


def test_many_cuts_makes_many_chunks() -> None:
    data = bytes(1 << 20)
    counts = [len(many_cuts(data, random.Random(seed))) for seed in range(50)]
    assert all(b"".join(many_cuts(data, random.Random(s))) == data for s in range(3))
    assert min(counts) >= 2 and max(counts) > 1000


@pytest.mark.parametrize("role", ALL_LARGE, ids=lambda r: r.name)
def test_grow_reaches_the_size_asked_for(role: Role) -> None:
    sizes = [len(grow(role, b"x", random.Random(seed), 1 << 20)[0]) for seed in range(8)]
    assert max(sizes) >= 1 << 20
    assert max(sizes) < 3 << 20  # a run never overshoots by more than one piece


# -- one RESP reply's totals --------------------------------------------------------------------

ITEMS = RESP_CAPS["max_reply_items"]


@pytest.mark.parametrize("leaf", [b"~0\r\n", b"*0\r\n", b"%0\r\n", b"_\r\n", b":1\r\n"])
@pytest.mark.parametrize("kind", [b"*", b"~"])
def test_resp_deep_nesting_of_empty_aggregates(leaf: bytes, kind: bytes) -> None:
    # 64 wide (max_array), 3 deep: 262,144 leaves in 1 MiB, each aggregate within its own caps;
    # only the reply's total refuses it, and before it holds more than max_reply_items values.
    data = resp_tree(leaf, RESP_CAPS["max_array"], 3, kind)
    rng = random.Random(leaf + kind)
    outcome = check(RESP_CLIENT, data, b"", [many_cuts(data, rng) for _ in range(2)],
                    bytewise_limit=0)
    assert outcome.error is RemoteProtocolError
    assert outcome.events == ()


def _exactly(values: int) -> bytes:
    """One array of arrays of empty sets, ``values`` values in all (the outer array, the 8
    arrays in it, the sets in them), each array within max_array."""
    sets = values - 1 - 8
    sizes = [sets // 8 + (i < sets % 8) for i in range(8)]
    assert max(sizes) <= RESP_CAPS["max_array"]
    return b"*8\r\n" + b"".join(b"*%d\r\n" % n + b"~0\r\n" * n for n in sizes)


def test_resp_a_reply_of_exactly_max_reply_items_is_read_one_more_is_not() -> None:
    ping = b"*1\r\n$4\r\nPING\r\n"
    outcome = check(RESP_CLIENT, _exactly(ITEMS), ping, bytewise_limit=0)
    assert outcome.error is None
    assert outcome.events[0].startswith("Reply:")
    assert check(RESP_CLIENT, _exactly(ITEMS + 1), ping).error is RemoteProtocolError


def test_resp_many_bulk_strings_in_one_reply_are_bounded_by_bytes() -> None:
    # 64 x 64 bulk strings of 64 bytes: every value and every aggregate within its caps, 256 KiB
    # in one reply: over max_reply_bytes (12 KiB here).
    value = b"$64\r\n" + b"v" * 64 + b"\r\n"
    data = b"*64\r\n" + (b"*16\r\n" + value * 16) * 64
    outcome = check(RESP_CLIENT, data, b"*1\r\n$4\r\nPING\r\n",
                    [many_cuts(data, random.Random(7))], bytewise_limit=0)
    assert outcome.error is RemoteProtocolError
