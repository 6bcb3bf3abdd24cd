"""Bytes fed after end of input: one rule for every Sans-IO core of the collection, client and
server roles alike (h11's rule): ``receive_data`` raises ``LocalProtocolError`` and feeds
nothing, the connection as it was. A socket gives nothing after EOF, so such bytes mean the
caller is out of step. (The client cores' own tests check their roles in more detail.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from beanstalk_client._protocol import Connection as BeanstalkClient
from beanstalk_client._server_protocol import ServerConnection as BeanstalkServer
from gearman_client._admin import AdminConnection
from gearman_client._protocol import Connection as GearmanClient
from gearman_client._server_protocol import ServerConnection as GearmanServer
from jobwire.errors import LocalProtocolError
from qless_client._resp import Connection as RespClient
from workq_client._protocol import Connection as WorkqClient
from workq_client._server_protocol import ServerConnection as WorkqServer

CORES: dict[str, tuple[Callable[[], Any], bytes]] = {
    "beanstalk client": (BeanstalkClient, b"DELETED\r\n"),
    "beanstalk server": (BeanstalkServer, b"list-tube-used\r\n"),
    "gearman client": (GearmanClient, b"\0RES\0\0\0\x11\0\0\0\0"),
    "gearman server": (GearmanServer, b"\0REQ\0\0\0\x10\0\0\0\0"),
    "gearman admin": (AdminConnection, b"OK\n"),
    "workq client": (WorkqClient, b"+OK\r\n"),
    "workq server": (WorkqServer, b"delete 00000000-0000-4000-8000-000000000000\r\n"),
    "resp client": (RespClient, b"+PONG\r\n"),
}


def events(conn: Any) -> list[object]:
    out = []
    for _ in range(5):  # a closed core keeps answering its closed state, or NEED_DATA
        event = conn.next_event()
        out.append(event)
    return out


@pytest.mark.parametrize("name", sorted(CORES))
def test_bytes_after_eof_raise_and_change_nothing(name: str) -> None:
    make, data = CORES[name]
    conn, same = make(), make()
    conn.receive_data(b"")
    same.receive_data(b"")
    with pytest.raises(LocalProtocolError, match="after EOF"):
        conn.receive_data(data)
    assert repr(events(conn)) == repr(events(same))  # as if the bytes never came
