"""The local Spark session the engine tests and the SQL benchmark both run queries in."""

from __future__ import annotations

from typing import Any


def local_session(app_name: str) -> Any:
    """A local[2] SparkSession (Spark's defaults kept: ANSI mode on in Spark 4), without its
    web UI, with 2 shuffle partitions (the default 200 cost more than the queries on 2
    cores). Needs pyspark and Java 17; raises what Spark raises when it cannot start."""
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
