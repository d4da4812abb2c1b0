"""Run every benchmark (``make bench``). Each prints its figures as ratios against a reference
implementation measured in the same run, so the comparison holds on a noisy machine.

Options are passed through: ``python bench/run_all.py --quick`` runs smaller sizes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUICK = "--quick" in sys.argv[1:]

BENCHMARKS: list[tuple[str, list[str], list[str]]] = [
    ("core figures and fits vs scikit-learn", ["bench.bench_core"], ["--rows", "1000000"]),
    ("streaming resample: time and peak memory", ["bench.bench_resample"], ["--rows", "2000000"]),
    ("every command's core at scale", ["bench.bench_scale"], ["--rows", "1000000"]),
]


def main() -> int:
    status = 0
    for title, module, quick_args in BENCHMARKS:
        print(f"\n=== {title} ===", flush=True)
        args = quick_args if QUICK else []
        done = subprocess.run([sys.executable, "-m", *module, *args], cwd=ROOT, check=False)
        status |= done.returncode
    for extra in sorted((ROOT / "bench").glob("*.py")):
        if extra.stem.startswith(("bench_", "run_all", "common", "__")):
            continue
        print(f"\n=== {extra.stem} ===", flush=True)
        args = ["--reps", "2"] if QUICK else []
        status |= subprocess.run(
            [sys.executable, "-m", f"bench.{extra.stem}", *args], cwd=ROOT, check=False
        ).returncode
    return status


if __name__ == "__main__":
    raise SystemExit(main())
