"""1e9 rows on paper: the size of a summary and the cost of merging one partition's.

A warehouse job summarises each partition where it lives (a day, a shard) and merges the
summaries. Two figures decide whether that scales to 1e9 rows: how big one partition's summary
is (it is bounded by the grid's occupied cells, not by the rows) and what merging one more
partition costs. This benchmark summarises partitions of the rare-event rows of
``bench/gen_big.py`` (30 days, the default 12-bit grid and 10 bins of ``calib summarize``),
for several partition sizes, writes each summary as Parquet, and merges them one at a time
(the running merge holds two summaries at once); then it states what 1e9 rows in partitions
of 1e6 or 1e7 rows would take, from the measured per-partition figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from scipy.special import expit

from calib_cli.io.summary_file import write_summary
from calib_cli.summaries.scan import summarize_lazy
from calib_cli.summaries.summary import ScoreSummary, merge_summaries


def _partition(rows: int, seed: int) -> pl.LazyFrame:
    rng = np.random.default_rng(seed)
    score = expit(rng.normal(-4.0, 1.5, rows))
    frame = pl.DataFrame({"score": score, "label": (rng.random(rows) < score).astype(np.int8)})
    return frame.lazy()


def _measure(rows: int, parts: int, folder: Path) -> dict[str, float]:
    summaries: list[ScoreSummary] = []
    seconds = []
    sizes = []
    for part in range(parts):
        lazy = _partition(rows, seed=part)
        start = time.perf_counter()
        summary = summarize_lazy(lazy)
        seconds.append(time.perf_counter() - start)
        path = folder / f"part{rows}_{part}.parquet"
        write_summary(summary, str(path))
        sizes.append(os.path.getsize(path))
        summaries.append(summary)
    merged = summaries[0]
    merge_seconds = []
    for summary in summaries[1:]:
        start = time.process_time()
        merged = merge_summaries([merged, summary])
        merge_seconds.append(time.process_time() - start)
    path = folder / f"merged{rows}.parquet"
    write_summary(merged, str(path))
    return {
        "keys": float(statistics.median(s.cell.size for s in summaries)),
        "bytes": float(statistics.median(sizes)),
        "summarise_s": float(statistics.median(seconds)),
        "merge_s": float(statistics.median(merge_seconds)),
        "merged_keys": float(merged.cell.size),
        "merged_bytes": float(os.path.getsize(path)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 4_000_000])
    parser.add_argument("--parts", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        results = {rows: _measure(rows, args.parts, Path(scratch)) for rows in args.sizes}
    print("| rows per partition | keys per summary | Parquet size | summarise | merge one more |")
    print("|---|---|---|---|---|")
    for rows, r in results.items():
        print(
            f"| {rows:,} | {r['keys']:,.0f} | {r['bytes'] / 1e6:.1f} MB | {r['summarise_s']:.2f} s"
            f" | {r['merge_s'] * 1e3:.0f} ms |"
        )
    print()
    largest = results[max(results)]
    print(
        f"Merged over {args.parts} partitions of {max(results):,} rows: "
        f"{largest['merged_keys']:,.0f} keys, {largest['merged_bytes'] / 1e6:.1f} MB. "
        "Keys are the occupied (cell, bin, class) keys of the 12-bit grid, not the rows: at "
        "most about 420,000 for scores between 1e-8 and 1 - 1e-8 (two classes), so a merged "
        "summary of 1e9 rows is at most a few tens of MB."
    )
    for rows in (1_000_000, 10_000_000):
        near = min(results, key=lambda r: abs(np.log(r / rows)))
        parts = 1_000_000_000 // rows
        merge = results[near]["merge_s"] * (parts - 1)
        print(
            f"1e9 rows in {parts:,} partitions of {rows:,}: each summary about "
            f"{results[near]['bytes'] / 1e6:.1f} MB (measured at {near:,} rows), merging them "
            f"one at a time about {merge:,.0f} s of one core in total "
            f"({results[near]['merge_s'] * 1e3:.0f} ms each), holding two summaries at once."
        )


if __name__ == "__main__":
    main()
