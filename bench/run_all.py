"""Run every benchmark (``make bench``) and write ``bench/RESULTS.md``.

Each benchmark prints its figures as ratios against a reference measured in the same run (so a
comparison holds on a noisy machine), with peak memory where it matters. This runner shows each
benchmark's output as it comes and collects them, with the machine and the versions, into
``bench/RESULTS.md``. A benchmark that prints Markdown (its first line starts with ``|`` or
``#``) is copied as it is; any other output is kept as a fenced block.

Options: ``--quick`` runs smaller sizes; ``--only NAME`` (repeatable) runs the benchmarks whose
module name contains NAME; ``--results PATH`` writes elsewhere (default ``bench/RESULTS.md``;
``-`` for none).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (title, module, arguments for --quick). Every other ``bench/*.py`` that is not a helper runs
#: after these, with ``--reps 2`` under --quick.
BENCHMARKS: list[tuple[str, str, list[str]]] = [
    (
        "Whole commands: out of core, against the tools users pick",
        "bench.bench_commands",
        ["--quick"],
    ),
    (
        "estimate-shift --method map against --method mle",
        "bench.bench_map",
        ["--reps", "1", "--batches", "8", "--bootstrap", "50"],
    ),
    ("Core figures and fits against scikit-learn", "bench.bench_core", ["--rows", "1000000"]),
    ("Streaming resample: time and peak memory", "bench.bench_resample", ["--rows", "2000000"]),
    ("Every command's core at scale", "bench.bench_scale", ["--rows", "1000000"]),
    (
        "estimate-shift on real drift (nycflights13) and exact label shift, against QuaPy",
        "bench.bench_drift",
        ["--quick", "--output", "-"],
    ),
    (
        "reliability --by with thousands of groups, human and --json",
        "bench.bench_groups",
        ["--reps", "2"],
    ),
    (
        "1e9 rows on paper: a partition's summary and the cost of merging it",
        "bench.bench_summary_merge",
        ["--sizes", "100000", "1000000", "--parts", "3"],
    ),
]
HELPERS = ("run_all", "common", "gen_big", "__init__")


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = ", ".join(
        f"{name} {metadata.version(name)}"
        for name in ("calib-cli", "polars", "numpy", "scipy", "scikit-learn", "pyarrow")
        if _installed(name)
    )
    return f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}; {versions}"


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def _run(module: str, args: list[str]) -> tuple[int, str]:
    """Run one benchmark, echoing its output live, and return its exit status and output."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    return process.wait(), "".join(lines)


def _as_markdown(output: str) -> str:
    text = output.strip("\n")
    if text.startswith(("|", "#")):
        return text
    return f"```\n{text}\n```"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--results", default=str(ROOT / "bench" / "RESULTS.md"))
    options = parser.parse_args()

    plan = [(title, module, quick) for title, module, quick in BENCHMARKS]
    listed = {module for _, module, _ in plan}
    for extra in sorted((ROOT / "bench").glob("*.py")):
        module = f"bench.{extra.stem}"
        if module not in listed and not extra.stem.startswith(HELPERS):
            plan.append((extra.stem, module, ["--reps", "2"]))
    if options.only:
        plan = [item for item in plan if any(word in item[1] for word in options.only)]

    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    sections = []
    status = 0
    for title, module, quick_args in plan:
        print(f"\n=== {title} ({module}) ===", flush=True)
        code, output = _run(module, quick_args if options.quick else [])
        status |= code
        failed = "" if code == 0 else f"\n\n**This benchmark failed (exit {code}).**"
        sections.append(f"## {title}\n\n`python -m {module}`\n\n{_as_markdown(output)}{failed}")

    if options.results != "-":
        size = "quick sizes (`--quick`)" if options.quick else "full sizes"
        if options.only:
            size += ", only " + ", ".join(f"`{word}`" for word in options.only)
        header = (
            "# Benchmark results\n\n"
            f"Written by `make bench` (`python bench/run_all.py`) on {started}, {size}.\n"
            f"Machine: {_machine()}.\n\n"
            "Every ratio compares two things measured in the same run; absolute seconds vary "
            "with the machine's load, ratios much less. Peak memory is the largest resident set "
            "of the process (getrusage).\n"
        )
        Path(options.results).write_text(header + "\n" + "\n\n".join(sections) + "\n")
        print(f"\nwrote {options.results}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
