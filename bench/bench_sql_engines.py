"""The emitted SQL in the engines: wall time of each query calib writes, in DuckDB (one thread)
and Spark local[2], on the same rows in the same run.

Queries: the summary (``summarize --emit-sql``), the sampling query (``resample --emit-sql``)
on integer keys and on text keys, and isotonic maps of 100, 1,000 and 10,000 knots
(``export-sql``; 10,000 in DuckDB only: Spark's planning grows with the knots), beside NumPy
applying the same maps to the same scores (``apply_chain``).
Each query runs ``--repeats`` times after a count of the loaded rows; the best time is
reported (Spark's includes planning and compiling the query, as a user's job pays it). The
rows are written to one Parquet file, which each engine loads into memory first (a DuckDB
table, a cached Spark view), so the times are the queries', not a file reader's. Needs
pyspark and Java 17 (``pip install -e '.[test]'``).

    python -m bench.bench_sql_engines --rows 1000000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import polars as pl

from bench.spark import local_session
from calib_cli.core.chain import apply_chain
from calib_cli.core.isotonic import IsotonicParams
from calib_cli.core.sampling import ClassRates
from calib_cli.sql.calibrators import calibrated_sql
from calib_cli.sql.sampling import SamplingQuery, sampling_sql
from calib_cli.sql.summary import SummaryQuery, summary_sql


def _maps() -> dict[str, IsotonicParams]:
    rng = np.random.default_rng(1)
    return {
        f"isotonic, {knots:,} knots": IsotonicParams(
            x_knots=np.linspace(0.0, 1.0, knots),
            y_knots=np.sort(rng.random(knots)),
            eps=0.0,
            strict=False,
        )
        for knots in (100, 1_000, 10_000)
    }


def _queries(dialect: str) -> dict[str, str]:
    """Each measured query: the summary query as emitted (its result, the summary, is a few
    thousand rows), the others wrapped so that their result is one count or sum."""
    out = {"summary query": summary_sql(SummaryQuery(table="rows"), dialect_name=dialect)}
    for kind, column in (("integer", "user_id"), ("text", "user_text")):
        query = SamplingQuery(table="rows", key_col=column, seed=7, rates=ClassRates(0.1))
        sampled = sampling_sql(query, dialect_name=dialect)
        out[f"sampling query, {kind} keys"] = f"SELECT COUNT(*) AS n FROM ({sampled}) AS s"
    for name, params in _maps().items():
        if dialect == "spark" and params.x_knots.size > 1_000:
            continue
        expr = calibrated_sql((params,), dialect_name=dialect)
        out[name] = f"SELECT SUM({expr}) AS p FROM rows"
    return out


def _best(run: Callable[[Any], Any], argument: Any, repeats: int) -> float:
    """The best wall time of ``run(argument)``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(argument)
        times.append(time.perf_counter() - start)
    return min(times)


def _columns(rows: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    score = rng.beta(0.5, 4.0, rows)
    users = rng.integers(0, max(rows // 3, 1), rows)
    return {
        "score": score,
        "label": (rng.random(rows) < score).astype(np.int64),
        "user_id": users,
        "user_text": np.char.add("user-", users.astype(str)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args()
    columns = _columns(args.rows)
    with tempfile.TemporaryDirectory() as scratch:
        source = f"{scratch}/rows.parquet"
        pl.DataFrame(columns).write_parquet(source)
        results = _measure(source, args.repeats, spark=not args.skip_spark)
    scores = columns["score"]
    for name, params in _maps().items():
        results[name]["numpy"] = _best(partial(apply_chain, (params,)), scores, args.repeats)
    print(f"\n| {args.rows:.0e} rows | DuckDB (1 thread) | Spark local[2] | NumPy |")
    print("|---|---|---|---|")
    for name, times in results.items():
        cells = [f"{times[e]:.2f} s" if e in times else "not run" for e in ("duckdb", "spark")]
        numpy_time = f"{times['numpy']:.2f} s" if "numpy" in times else ""
        print(f"| {name} | {' | '.join(cells)} | {numpy_time} |")


def _measure(source: str, repeats: int, *, spark: bool) -> dict[str, dict[str, float]]:
    """Each query's best time in each engine, by query name then engine."""
    import duckdb

    results: dict[str, dict[str, float]] = {}
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute(f"CREATE TABLE rows AS SELECT * FROM read_parquet('{source}')")
    for name, sql in _queries("duckdb").items():
        results.setdefault(name, {})["duckdb"] = _best(
            lambda q: con.execute(q).fetchall(), sql, repeats
        )
        print(f"duckdb  {name:32} {results[name]['duckdb']:7.2f} s", flush=True)

    if spark:
        session = local_session("calib-bench")
        session.sparkContext.setLogLevel("ERROR")
        session.read.parquet(source).cache().createOrReplaceTempView("rows")
        session.sql("SELECT COUNT(*) FROM rows").collect()  # loads the cache
        for name, sql in _queries("spark").items():
            results[name]["spark"] = _best(lambda q: session.sql(q).collect(), sql, repeats)
            print(f"spark   {name:32} {results[name]['spark']:7.2f} s", flush=True)
        session.stop()
    return results


if __name__ == "__main__":
    main()
