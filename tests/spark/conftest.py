"""One SparkSession for the whole test session (``local[2]``, quiet, 2 shuffle partitions) with
jobwire's formats registered, and the servers of every protocol's suite.

PySpark 4 needs Python >= 3.11 and a Java runtime: when either is missing the Spark tests skip
and say why, or fail under JOBWIRE_REQUIRE_REAL_SERVERS=1 (CI), never skip silently.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REQUIRE_REAL
from tests.gearman.conftest import function, gearman_server  # noqa: F401  # fixtures
from tests.qless.conftest import redis_server  # noqa: F401  # fixtures
from tests.workq.conftest import qname, workq_server  # noqa: F401  # fixtures


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


#: Spark's own logging: errors only (the JVM reads this file at start).
LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def spark_env() -> dict[str, str]:
    """The environment a Spark driver needs here: workers on this interpreter, loopback only."""
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def build_session(app: str) -> Any:
    """A quiet ``local[2]`` session with jobwire's formats registered."""
    from pyspark.sql import SparkSession

    import jobwire.spark

    os.environ.update(spark_env())
    log4j = Path(tempfile.mkdtemp(prefix="jobwire-spark-")) / "log4j2.properties"
    log4j.write_text(LOG4J)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    jobwire.spark.register(spark)
    return spark


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of the test session."""
    need_spark()
    session = build_session("jobwire-tests")
    yield session
    session.stop()
