"""``calib reliability --by`` with thousands of groups: whole commands, human and JSON output.

What it measures (issue 11, "Output people read"): the installed ``calib`` process on a CSV of
``--groups`` groups (default 2,000) of ``--rows-per-group`` rows each (default 1: 2,000 groups
over 2,000 rows, the case of the issue), with

- the human report (to a pipe, so 120 columns; and at ``COLUMNS=80``) and ``--json``;
- the same file without ``--by`` (one entry) and ``calib --version`` (the start-up floor),
  measured in the same run, so the cost of the groups themselves reads off the difference.

Target: under 3 s wall for the human and the JSON report of 2,000 groups on a 2-core machine.
Each figure is the best of ``--reps`` runs (the least disturbed by a busy machine).

Run: ``python -m bench.bench_groups [--groups 2000] [--rows-per-group 1] [--reps 3]``. Prints
Markdown.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
CALIB = str(Path(sys.executable).with_name("calib"))
TARGET_SECONDS = 3.0


def write_groups(path: Path, *, groups: int, rows_per_group: int, seed: int = 0) -> None:
    """A CSV of ``groups`` groups (``g0``, ``g1``, ...), random scores and labels."""
    rng = np.random.default_rng(seed)
    n = groups * rows_per_group
    pl.DataFrame(
        {
            "g": [f"g{i % groups}" for i in range(n)],
            "score": rng.random(n),
            "label": (rng.random(n) < 0.3).astype(int),
        }
    ).write_csv(path)


def best_wall(command: list[str], *, reps: int, env: dict[str, str] | None = None) -> float:
    """The fastest of ``reps`` runs of ``command`` (output discarded), in wall seconds."""
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run(
            command,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
            env={**os.environ, "NO_COLOR": "1", **(env or {})},
        )
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--groups", type=int, default=2000)
    parser.add_argument("--rows-per-group", type=int, default=1)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as scratch:
        data = Path(scratch) / "groups.csv"
        write_groups(data, groups=args.groups, rows_per_group=args.rows_per_group)
        rows = args.groups * args.rows_per_group
        runs = [
            ("calib --version (start-up)", [CALIB, "--version"], None, False),
            ("reliability, no --by (one entry)", [CALIB, "reliability", str(data)], None, False),
            (
                "reliability --by g (human, pipe)",
                [CALIB, "reliability", str(data), "--by", "g"],
                None,
                True,
            ),
            (
                "reliability --by g (human, COLUMNS=80)",
                [CALIB, "reliability", str(data), "--by", "g"],
                {"COLUMNS": "80"},
                True,
            ),
            (
                "reliability --by g --json",
                [CALIB, "reliability", str(data), "--by", "g", "--json"],
                None,
                True,
            ),
        ]
        print(
            f"| {args.groups:,} groups over {rows:,} rows (best of {args.reps}) | wall s | target |"
        )
        print("|---|---:|---|")
        for name, command, env, targeted in runs:
            seconds = best_wall(command, reps=args.reps, env=env)
            verdict = ""
            if targeted:
                met = "met" if seconds <= TARGET_SECONDS else "missed"
                verdict = f"< {TARGET_SECONDS:g} s: {met}"
            print(f"| {name} | {seconds:.2f} | {verdict} |", flush=True)


if __name__ == "__main__":
    main()
