"""PySpark data sources and sinks for the job queues (PySpark >= 4, Python Data Source API).

    from jobwire.spark import register
    register(spark)
    df.write.format("beanstalk").option("url", "beanstalk://10.0.0.5:11300") \\
        .option("tube", "emails").mode("append").save()
    spark.read.format("gearman").option("url", "gearman://10.0.0.6").option("table", "status") \\
        .load()
    spark.readStream.format("workq").option("url", "workq://10.0.0.7").option("name", "resize") \\
        .load()

Every format opens its connections where Spark runs its code (the executors for writes and
batch reads, the driver for the stream readers, which hold the jobs until Spark commits them),
from the options alone. Delivery is at-least-once everywhere: see docs/spark.md.

Needs the ``spark`` extra (``pip install 'jobwire[spark]'``: pyspark and pyarrow, Python >= 3.11)
and a Java runtime for Spark.
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401  # Spark's Arrow paths need it: fail here, not in a task
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"jobwire.spark needs PySpark 4 and pyarrow (pip install 'jobwire[spark]', "
        f"Python >= 3.11): {exc}"
    ) from exc

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource

from ._beanstalk import BeanstalkDataSource
from ._common import BODY_COLUMNS, BadOption, BadRow, RowRefused, WriteReport
from ._gearman import GearmanDataSource, gearman_call
from ._qless import QlessDataSource
from ._session import local_env, local_session
from ._workq import WorkqDataSource, workq_run

__all__ = [
    "BODY_COLUMNS",
    "FORMATS",
    "BadOption",
    "BadRow",
    "BeanstalkDataSource",
    "GearmanDataSource",
    "QlessDataSource",
    "RowRefused",
    "WorkqDataSource",
    "WriteReport",
    "gearman_call",
    "local_env",
    "local_session",
    "register",
    "workq_run",
]

#: Every format :func:`register` installs, by its ``format(...)`` name. A new queue adds its
#: DataSource class here and nowhere else.
FORMATS: tuple[type[DataSource], ...] = (
    BeanstalkDataSource,
    GearmanDataSource,
    WorkqDataSource,
    QlessDataSource,
)


def register(spark: SparkSession) -> None:
    """Register the formats ``beanstalk``, ``gearman``, ``workq`` and ``qless`` with ``spark``,
    for ``spark.read``/``readStream``/``df.write`` ``.format(name)``. Sends nothing anywhere."""
    for source in FORMATS:
        spark.dataSource.register(source)
