"""One SparkSession for the whole test session (``local[2]``, quiet, 2 shuffle partitions) with
jobwire's formats registered, and the servers of every protocol's suite.

PySpark 4 needs Python >= 3.11 and a Java runtime: when either is missing the Spark tests skip
and say why, or fail under JOBWIRE_REQUIRE_REAL_SERVERS=1 (CI), never skip silently.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import REQUIRE_REAL
from tests.gearman.conftest import function, gearman_server  # noqa: F401  # fixtures
from tests.qless.conftest import redis_server  # noqa: F401  # fixtures
from tests.workq.conftest import qname  # noqa: F401  # fixture (workq_server: the plugin's)


def spark_missing() -> str | None:
    """Why the Spark tests cannot run here, or None."""
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        return (f"PySpark 4 and pyarrow are not importable ({exc}); they need Python >= 3.11: "
                f"pip install -e '.[test]' (it brings the spark extra)")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime for Spark (apt-get install -y openjdk-17-jre-headless)"
    return None


def need_spark() -> None:
    """Call at the top of every Spark test module: skip it, saying why, or fail it in CI."""
    reason = spark_missing()
    if reason is None:
        return
    if REQUIRE_REAL:
        pytest.fail(f"{reason} and JOBWIRE_REQUIRE_REAL_SERVERS=1", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def spark_env() -> dict[str, str]:
    """The environment a Spark driver needs here (for subprocess drivers)."""
    from jobwire.spark import local_env

    return local_env()


def build_session(app: str) -> Any:
    """A quiet ``local[2]`` session with jobwire's formats registered."""
    from jobwire.spark import local_session

    return local_session(app, conf={"spark.sql.streaming.stopTimeout": "10s"})


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of the test session."""
    need_spark()
    session = build_session("jobwire-tests")
    yield session
    session.stop()
