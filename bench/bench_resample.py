"""Streaming resample: time and peak memory of the installed ``calib resample`` on a Parquet file
of many rows, against reading the same file into memory with Polars and sampling there (the
in-memory reference). Memory is the child process's peak resident set (getrusage)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

CALIB = str(Path(sys.executable).with_name("calib"))


def _run(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of a child process."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        os.execv(command[0], command)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=20_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "big.parquet"
        rng = np.random.default_rng(0)
        chunks = []
        for start in range(0, args.rows, 5_000_000):
            n = min(5_000_000, args.rows - start)
            chunks.append(
                pl.DataFrame(
                    {
                        "id": np.arange(start, start + n, dtype=np.int64),
                        "f1": rng.normal(size=n),
                        "f2": rng.normal(size=n),
                        "f3": rng.normal(size=n),
                        "label": (rng.random(n) < 0.02).astype(np.int8),
                    }
                )
            )
        pl.concat(chunks).write_parquet(source, row_group_size=1_000_000)
        del chunks
        size = source.stat().st_size / 2**20
        out = Path(scratch) / "sample.parquet"
        seconds, peak = _run(
            [
                CALIB,
                "resample",
                str(source),
                "-o",
                str(out),
                "--negative-rate",
                "0.1",
                "--key-col",
                "id",
                "-q",
            ]
        )
        reference = (
            "import polars as pl, sys; df = pl.read_parquet(sys.argv[1]); "
            "df.filter((pl.col('label') == 1) | (pl.col('id').hash(7) < 2**64 // 10))"
            ".write_parquet(sys.argv[2])"
        )
        ref_seconds, ref_peak = _run(
            [sys.executable, "-c", reference, str(source), str(Path(scratch) / "ref.parquet")]
        )
        print(
            f"input: {args.rows:,} rows, {size:,.0f} MiB Parquet "
            f"({pl.scan_parquet(source).collect_schema().len()} columns)"
        )
        print(f"{'':<34} {'seconds':>8} {'peak MiB':>9}")
        print(f"{'calib resample (streaming)':<34} {seconds:8.2f} {peak:9.0f}")
        print(f"{'polars in memory (reference)':<34} {ref_seconds:8.2f} {ref_peak:9.0f}")
        print(
            f"ratios calib/reference: time {seconds / ref_seconds:.2f}, "
            f"memory {peak / ref_peak:.2f}"
        )


if __name__ == "__main__":
    main()
