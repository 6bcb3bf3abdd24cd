"""A connect (and its TLS handshake) is always bounded: every client's ``connect_timeout`` is
the one given, else its reply ``timeout``, else ``jobwire._transport.CONNECT_TIMEOUT`` (10 s)
even when replies may take for ever (``timeout=None``). Checked on the async classes, which do
not connect when made; ``tests/*/test_tls.py`` runs the bound against a silent peer."""

from __future__ import annotations

from typing import Any

import pytest

import beanstalk_client
import gearman_client
import qless_client
import workq_client
from jobwire._transport import CONNECT_TIMEOUT

CLASSES: list[Any] = [
    beanstalk_client.AsyncClient, gearman_client.AsyncClient, gearman_client.AsyncAdmin,
    workq_client.AsyncClient, qless_client.AsyncRedis,
]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_connect_timeout_is_never_unbounded(cls: Any) -> None:
    assert CONNECT_TIMEOUT == 10.0
    assert cls("127.0.0.1", timeout=None).connect_timeout == CONNECT_TIMEOUT
    assert cls("127.0.0.1", timeout=None, connect_timeout=None).connect_timeout == 10.0
    assert cls("127.0.0.1", timeout=3.0).connect_timeout == 3.0
    assert cls("127.0.0.1", timeout=None, connect_timeout=0.5).connect_timeout == 0.5
