"""A driver that crashes before its first batch commits: run as
``python -m tests.spark.stream_crash FORMAT OPTIONS_JSON CHECKPOINT OUTFILE``.

It starts a streaming query on FORMAT; the sink of its first batch writes the batch's job ids
to OUTFILE (one per line, then ``END``) and then hangs, so the batch never commits. The test
kills this process's whole group with SIGKILL at that point: the driver, its JVM and its
Python workers die together, as in a machine failure.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from tests.spark.conftest import build_session


def main() -> None:
    fmt, options, checkpoint, outfile = sys.argv[1:5]
    spark = build_session("jobwire-crash")
    reader = spark.readStream.format(fmt)
    for key, value in json.loads(options).items():
        reader = reader.option(key, value)

    def sink(batch: Any, batch_id: int) -> None:
        # The job id is each stream schema's first column (id, or qless's jid).
        ids = [str(row[0]) for row in batch.select(batch.columns[0]).collect()]
        if not ids:
            return
        with open(outfile, "w") as out:
            out.write("\n".join([*ids, "END"]) + "\n")
        while True:  # never return: the batch never commits
            time.sleep(60)

    (reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
     .trigger(processingTime="0.5 seconds").start().awaitTermination())


if __name__ == "__main__":
    main()
