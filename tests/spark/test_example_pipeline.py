"""examples/spark_pipeline.py, run on the test session's Spark: every row becomes a job, every
job is done, and the metrics count each wait and run the events show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..conftest import load_file
from .conftest import need_spark

need_spark()
pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"


def test_the_pipeline_example_end_to_end(spark: Any, tmp_path: Path) -> None:
    example = load_file("spark_pipeline", EXAMPLE)
    result = example.run(spark, rows=400, concurrency=16, out=tmp_path)
    assert (result["written"], result["deleted"], result["left"]) == (400, 400, 0)
    [row] = result["metrics"]
    assert (row.system, row.queue) == ("beanstalk", "orders")
    # A wait per reservation (every put, plus each release after a planned failure) and a run
    # per completed job.
    assert row.wait.total == 400 + result["failed"] and row.run.total == 400
    assert row.failures == result["failed"]
    assert (tmp_path / "metrics" / "metrics.parquet").is_dir()
    assert (tmp_path / "metrics" / "beanstalk-orders.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
