"""Build the summary of a Parquet file with the streaming engine; print time, size and figures.

Run under ``/usr/bin/time -v`` for the peak RSS:

    /usr/bin/time -v .venv/bin/python -m bench.bench_summary /tmp/big.parquet [--by day]
"""

from __future__ import annotations

import argparse
import time

import polars as pl

from calib_cli.summaries import cells_to_resolve, merge_summaries, reliability_from_summary
from calib_cli.summaries.scan import rows_in_cells, summarize_lazy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path")
    parser.add_argument("--by", default=None)
    parser.add_argument("--resolve", action="store_true", help="also run the second pass")
    args = parser.parse_args()
    start = time.perf_counter()
    summary = summarize_lazy(pl.scan_parquet(args.path), group_column=args.by)
    built = time.perf_counter() - start
    print(f"summary: {built:.2f} s, {summary.n_keys} keys, {summary.nbytes / 2**20:.1f} MiB")
    print(f"groups: {len(summary.groups)}; JSON {len(summary.to_json()) / 2**20:.1f} MiB")
    pooled = summary.pooled()
    start = time.perf_counter()
    merged = merge_summaries([summary.select_group(g) for g in summary.groups])
    print(f"merge of {len(summary.groups)} groups: {time.perf_counter() - start:.3f} s")
    del merged
    start = time.perf_counter()
    figures = reliability_from_summary(pooled)
    print(f"figures: {time.perf_counter() - start:.2f} s; {figures.exactness}")
    print(f"auc {figures.reliability.auc!r} ece {figures.reliability.ece!r}")
    if args.resolve:
        start = time.perf_counter()
        keys = cells_to_resolve(pooled)
        rows = rows_in_cells(pl.scan_parquet(args.path), keys, summary=pooled)
        refined = reliability_from_summary(pooled, resolved=rows)
        took = time.perf_counter() - start
        print(f"second pass: {took:.2f} s, {keys[0].size} cells, {rows.score.size} scores")
        print(f"refined auc {refined.reliability.auc!r} bound {refined.exactness.auc_bound:.2e}")


if __name__ == "__main__":
    main()
