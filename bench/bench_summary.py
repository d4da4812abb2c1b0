"""The whole streaming reliability computation on a Parquet file against the floor.

``calib reliability``'s out-of-core path is: the summary (one streaming group-by), the bounded
refinement passes (:func:`~calib_cli.summaries.scan.refine_lazy`), then the figures. The floor
is a bare Polars streaming group-by of a 1e5-cell score grid by label over the same file.
``--mode`` runs one of them (run each under ``/usr/bin/time -v`` for the peak RSS);
``--pairs N`` alternates both N times in subprocesses and prints the ratio of the medians.

    .venv/bin/python -m bench.bench_summary /tmp/big.parquet --pairs 3
    /usr/bin/time -v .venv/bin/python -m bench.bench_summary /tmp/big.parquet --mode summary
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import polars as pl

from calib_cli.summaries import reliability_from_summary
from calib_cli.summaries.scan import refine_lazy, summarize_lazy


def floor(path: str) -> dict[str, float]:
    start = time.perf_counter()
    pl.scan_parquet(path).group_by(
        (pl.col("score") * 100_000).floor().cast(pl.Int32).alias("cell"), "label"
    ).agg(pl.len(), pl.col("score").sum()).collect(engine="streaming")
    return {"seconds": time.perf_counter() - start}


def summary(path: str, by: str | None = None) -> dict[str, float]:
    start = time.perf_counter()
    built = summarize_lazy(pl.scan_parquet(path), group_column=by)
    first = time.perf_counter() - start
    pooled = built.pooled()
    levels = refine_lazy(pl.scan_parquet(path), pooled)
    refined = time.perf_counter() - start - first
    figures = reliability_from_summary(pooled, refinement=levels)
    return {
        "seconds": time.perf_counter() - start,
        "first_pass": first,
        "refinement": refined,
        "keys": built.n_keys,
        "levels": len(levels),
        "level_keys": sum(level.summary.n_keys for level in levels),
        "auc": figures.reliability.auc,
        "auc_bound": figures.exactness.auc_bound,
        "auc_bound_before": reliability_from_summary(pooled).exactness.auc_bound,
    }


def _run(path: str, mode: str) -> dict[str, float]:
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "bench.bench_summary", path,
         "--mode", mode],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    result["peak_rss_mib"] = int(done.stderr.strip().splitlines()[-1]) / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path")
    parser.add_argument("--by", default=None)
    parser.add_argument("--mode", choices=["floor", "summary"], default=None)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    if args.mode == "floor":
        print(json.dumps(floor(args.path)))
        return
    if args.mode == "summary":
        print(json.dumps(summary(args.path, args.by)))
        return
    floors, sums = [], []
    for i in range(args.pairs):
        f, s = _run(args.path, "floor"), _run(args.path, "summary")
        floors.append(f["seconds"])
        sums.append(s["seconds"])
        print(f"pair {i}: floor {f} | summary {s}", flush=True)
    ratio = statistics.median(sums) / statistics.median(floors)
    print(f"ratio of medians (summary + refinement + figures / floor): {ratio:.2f}")


if __name__ == "__main__":
    main()
