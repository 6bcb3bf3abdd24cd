"""Faults tests use every package's servers: the fixtures are the packages' own."""

from tests.gearman.conftest import fresh_gearman, gearman_server
from tests.qless.conftest import fresh_redis, redis_server
from tests.workq.conftest import fresh_workq_server, qname, workq_server

__all__ = ["fresh_gearman", "fresh_redis", "fresh_workq_server", "gearman_server", "qname",
           "redis_server", "workq_server"]
