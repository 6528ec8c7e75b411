"""The tests' JVM options, and the class-data-sharing archive that starts their Spark sooner.

Every Spark JVM the tests start (this session's, the writers', Connect servers', the demo's
and Dagster's runs: they inherit SPARK_SUBMIT_OPTS) compiles with C1 only and collects with
the serial collector, so the tests' small jobs start and finish sooner on two cores.

Each of them also loads some ten thousand classes of Spark's jars, and used to parse and check
them anew (the suite starts about a hundred JVMs). `python tests/spark_archive.py` runs a
small Spark job that loads the classes the tests use and has the JVM archive them as it
exits (JDK 13+'s dynamic CDS archive, `-XX:ArchiveClassesAtExit`) into `spark.jsa` in the
virtual environment, whose jars it is of; `make test` runs it once per environment. With
the archive a local session's JVM takes about 9 CPU seconds to start and run a job where
it took 15. Without it (or with one the JVM cannot use, from other jars or another JDK),
the JVMs load their classes as before, silently. Users' Spark is not affected.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

BASE_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: The archive of this virtual environment's Spark (`main` writes it).
ARCHIVE = Path(sys.prefix) / "spark.jsa"
#: An archive the JVM cannot map is a warning on its stdout; the tests read some of those.
QUIET = "-Xlog:cds=off,cds+dynamic=off"


def jvm_options() -> str:
    """SPARK_SUBMIT_OPTS for the tests' JVMs: the archive's when there is one."""
    if ARCHIVE.is_file():
        return f"{BASE_OPTIONS} -XX:SharedArchiveFile={ARCHIVE} {QUIET}"
    return BASE_OPTIONS


def main() -> int:
    """Writes ARCHIVE from a JVM that ran what the tests' Spark runs most."""
    partial = ARCHIVE.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    dump = f"-XX:ArchiveClassesAtExit={partial} {QUIET}"  # the classes it skips, unsaid
    os.environ["SPARK_SUBMIT_OPTS"] = f"{BASE_OPTIONS} {dump}"
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers of this Python

    from pyspark import SparkContext
    from pyspark.sql import Observation, SparkSession, Window, functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as scratch:
        frame = spark.createDataFrame(
            [(1, "a", 2.5, "2024-01-01"), (2, "b", None, "2024-01-02")],
            "id BIGINT, name STRING, price DOUBLE, day STRING",
        ).select(
            "id",
            "name",
            F.col("price").cast("decimal(18,2)").alias("price"),
            F.to_date("day").alias("day"),
            F.to_timestamp("day").alias("at"),
        )
        observation = Observation("rows")
        counted = frame.observe(observation, F.count(F.lit(1)).alias("rows"))
        counted.write.mode("overwrite").option("compression", "zstd").parquet(f"{scratch}/p")
        assert observation.get["rows"] == 2
        frame.write.mode("overwrite").option("header", "true").csv(f"{scratch}/c")
        frame.write.mode("overwrite").json(f"{scratch}/j")
        back = spark.read.parquet(f"{scratch}/p")
        spark.read.option("header", "true").csv(f"{scratch}/c").count()
        spark.read.json(f"{scratch}/j").count()
        back.createOrReplaceTempView("back")
        ranked = spark.sql("SELECT name, SUM(price) AS total FROM back GROUP BY name").join(
            back, "name"
        )
        ranked.withColumn("n", F.row_number().over(Window.orderBy("id"))).collect()
        if hasattr(back, "toArrow"):  # Spark 4.0+
            back.toArrow()
        list(back.toLocalIterator())
    gateway = SparkContext._gateway
    assert gateway is not None
    jvm = gateway.proc
    spark.stop()
    jvm.stdin.close()  # the gateway exits on EOF, and archives its classes as it does
    jvm.wait(timeout=300)
    if not partial.is_file() or partial.stat().st_size == 0:
        print(f"the JVM wrote no archive at {partial}", file=sys.stderr)
        return 1
    partial.replace(ARCHIVE)
    print(f"{ARCHIVE}: {ARCHIVE.stat().st_size >> 20} MiB of Spark's classes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
