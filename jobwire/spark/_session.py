"""A quiet SparkSession on this machine with jobwire's formats registered: what the metrics
CLI, the example, the benchmark and the test suite each need, in one place."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

__all__ = ["local_env", "local_session"]

#: Spark's own logging: errors only, to stderr (the JVM reads this file when it starts).
_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def local_env() -> dict[str, str]:
    """The environment a local Spark driver needs: Spark's Python workers on this interpreter
    (the one that has jobwire and pyarrow), everything on loopback. Values already set in the
    environment win."""
    wanted = {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    return {name: os.environ.get(name, value) for name, value in wanted.items()}


def local_session(
    app: str = "jobwire",
    master: str = "local[2]",
    *,
    partitions: int = 2,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A ``master`` session (``local[N]``) that logs errors only, has no UI, binds loopback, and
    has jobwire's formats registered (:func:`jobwire.spark.register`); ``partitions`` is the
    shuffle partitions and default parallelism; ``conf`` adds or overrides settings. Sets
    :func:`local_env` in ``os.environ`` first. Returns the active session if there is one
    (``getOrCreate``).
    """
    from . import register

    os.environ.update(local_env())
    log4j = Path(tempfile.mkdtemp(prefix="jobwire-spark-")) / "log4j2.properties"
    log4j.write_text(_LOG4J)
    settings = {
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.default.parallelism": str(partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j}",
        **(conf or {}),
    }
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
