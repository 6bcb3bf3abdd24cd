"""Faults tests use every package's servers: the fixtures are the packages' own (Workq's
``workq_server`` is the plugin's, as in tests/workq)."""

from tests.gearman.conftest import fresh_gearman, gearman_server
from tests.qless.conftest import fresh_redis, redis_server
from tests.workq.conftest import fresh_workq_server, qname

__all__ = ["fresh_gearman", "fresh_redis", "fresh_workq_server", "gearman_server", "qname",
           "redis_server"]
