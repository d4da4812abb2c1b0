"""``calib estimate-shift --method map`` against ``--method mle`` on the same weekly batches.

The data follow reference 001's scenario: a reference of 50,000 rows with 2.3% positives, and
39 weekly batches of about 6,500 rows each whose positive scores drift from beta(4, 2) to
beta(3, 3) over the weeks while the base rate wanders around 2.3%. Both commands run in the
same process tree, alternately, ``--reps`` times each (default bootstrap of 200 replicates);
the figure is the median over the pairs (an mle run, then a map run) of the ratio of their
whole-command wall times (process start, reading, every batch's estimate and bootstrap,
writing the report). The target is map at most 3 times mle.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from bench.common import report

CALIB = str(Path(sys.executable).with_name("calib"))


def write_data(
    folder: Path, *, n_batches: int, batch_rows: int, seed: int = 0
) -> tuple[Path, Path]:
    """The reference and the batches (column ``week``) as Parquet files in ``folder``."""
    rng = np.random.default_rng(seed)
    n_ref = 50_000
    y = rng.random(n_ref) < 0.023
    reference = pl.DataFrame(
        {
            "score": np.where(y, rng.beta(4, 2, n_ref), rng.beta(1.5, 8, n_ref)),
            "label": y.astype(np.int8),
        }
    )
    frames = []
    for week in range(n_batches):
        drift = week / max(1, n_batches - 1)  # 0 -> 1: positives' shape beta(4, 2) -> beta(3, 3)
        rate = 0.023 * (1.0 + 0.3 * np.sin(week / 4.0))
        t = rng.random(batch_rows) < rate
        positive = rng.beta(4.0 - drift, 2.0 + drift, batch_rows)
        frames.append(
            pl.DataFrame(
                {
                    "week": np.full(batch_rows, week, dtype=np.int32),
                    "score": np.where(t, positive, rng.beta(1.5, 8, batch_rows)),
                }
            )
        )
    ref_path, target_path = folder / "reference.parquet", folder / "batches.parquet"
    reference.write_parquet(ref_path)
    pl.concat(frames).write_parquet(target_path)
    return ref_path, target_path


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{done.stderr.decode()}")
    return elapsed


def bench_map(
    *, reps: int = 3, n_batches: int = 39, batch_rows: int = 6_500, bootstrap: int = 200
) -> float:
    """Wall seconds of map and mle over ``reps`` alternating runs (mle, then map); returns the
    median over the pairs of map / mle."""
    with tempfile.TemporaryDirectory() as scratch:
        ref_path, target_path = write_data(
            Path(scratch), n_batches=n_batches, batch_rows=batch_rows
        )
        times: dict[str, list[float]] = {"map": [], "mle": []}
        for _ in range(reps):
            for method in ("mle", "map"):
                out = Path(scratch) / f"{method}.json"
                times[method].append(
                    _seconds(
                        [
                            CALIB,
                            "estimate-shift",
                            "--reference",
                            str(ref_path),
                            "--target",
                            str(target_path),
                            "--batch-col",
                            "week",
                            "--method",
                            method,
                            "--bootstrap",
                            str(bootstrap),
                            "--report",
                            str(out),
                        ]
                    )
                )
        mle, map_ = statistics.median(times["mle"]), statistics.median(times["map"])
        what = f"estimate-shift {n_batches} batches x {batch_rows} rows, B={bootstrap}"
        report([(f"{what} map", map_, mle, "the same command with --method mle")])
        print(f"runs (s): map {times['map']}, mle {times['mle']}")
        # each map run against the mle run just before it: on a shared machine the load
        # changes between pairs more than within one
        paired = [m / e for m, e in zip(times["map"], times["mle"], strict=True)]
        print(f"paired map / mle: {[round(r, 2) for r in paired]}")
        return statistics.median(paired)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batches", type=int, default=39)
    parser.add_argument("--batch-rows", type=int, default=6_500)
    parser.add_argument("--bootstrap", type=int, default=200)
    args = parser.parse_args()
    ratio = bench_map(
        reps=args.reps,
        n_batches=args.batches,
        batch_rows=args.batch_rows,
        bootstrap=args.bootstrap,
    )
    print(f"map / mle whole-command time, median of pairs: {ratio:.2f} (target <= 3)")


if __name__ == "__main__":
    main()
