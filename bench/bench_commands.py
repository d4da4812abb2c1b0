"""Whole commands, out of core: every command at 1e5 to 1e8 rows, with peak memory, against the
tools a user would pick instead, measured in the same run.

What it measures (issue "Out of core"):

- every command as the installed ``calib`` process on a generated Parquet file (id, score,
  label, day; ``bench/gen_big.py``, written in chunks): wall seconds and peak resident memory
  (the child's ``ru_maxrss``); each child runs under an address-space cap (``--cap-gib``,
  default 12) so a command that does not stream fails as "out of memory" instead of taking the
  machine;
- ``reliability`` at the largest size against the floor: a bare Polars streaming group-by of a
  1e5-cell score grid by label over the same file (target: at most 3x); and, for context,
  against Polars's streaming group-by of the summary's own per-key sums
  (:func:`calib_cli.summaries.scan.summary_plan`: seven sums and the extremes per key, no
  sub-cells, sums in whatever order its threads finish);
- ``reliability`` at 1e7 against the pyarrow + scikit-learn script a user writes today (read
  the two columns, ``calibration_curve``, Brier, log loss, AUC, average precision; target: at
  most 0.25x the time and 0.4x the peak memory);
- how cost grows: seconds and MiB per size, and the slope between the two largest sizes.

Each comparison runs ``reliability`` and the reference in turn (``--pairs``, default 5) and
reports the median of the pairs' ratios: the machine's speed drifts over minutes, and a pair
sees one speed.

Run: ``python -m bench.bench_commands [--sizes 1e5,1e6,1e7,1e8] [--quick] [--pairs N]``.
Prints Markdown.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CALIB = str(Path(sys.executable).with_name("calib"))
GIB = 2**30
BATCHES = 30  # days in the generated file: estimate-shift batches, rerank-strata strata

SKLEARN_SCRIPT = """
import sys
import pyarrow.parquet as pq
from sklearn.calibration import calibration_curve
from sklearn.metrics import average_precision_score, brier_score_loss, log_loss, roc_auc_score
table = pq.read_table(sys.argv[1], columns=["score", "label"])
p = table.column("score").to_numpy()
y = table.column("label").to_numpy()
calibration_curve(y, p, n_bins=10)
print(brier_score_loss(y, p), log_loss(y, p), roc_auc_score(y, p), average_precision_score(y, p))
"""

POLARS_FLOOR_SCRIPT = """
import sys
import polars as pl
cell = (pl.col("score") * 100_000).floor().cast(pl.Int32).alias("cell")
out = (
    pl.scan_parquet(sys.argv[1])
    .group_by(cell, "label")
    .agg(pl.len(), pl.col("score").sum())
    .collect(engine="streaming")
)
print(out.height)
"""

SUMMARY_PLAN_SCRIPT = """
import sys
import polars as pl
from calib_cli.summaries.scan import summary_plan
print(summary_plan(pl.scan_parquet(sys.argv[1])).collect(engine="streaming").height)
"""


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_mib: float
    ok: bool
    note: str = ""

    def cell(self) -> str:
        if not self.ok:
            return f"failed ({self.note})"
        return f"{self.seconds:.1f} s, {self.peak_mib:,.0f} MiB"


@dataclass(frozen=True)
class Paired:
    """calib's ``reliability`` and a reference run in turn: each one's median run, and the
    medians of the pairs' ratios."""

    ours: Run
    theirs: Run
    time_ratio: float
    memory_ratio: float
    ok: bool


def _paired(pairs: list[tuple[Run, Run]]) -> Paired:
    ok = all(a.ok and b.ok for a, b in pairs)
    ratios = sorted(a.seconds / b.seconds for a, b in pairs)
    memory = sorted(a.peak_mib / b.peak_mib for a, b in pairs)
    return Paired(
        ours=_median([a for a, _ in pairs]),
        theirs=_median([b for _, b in pairs]),
        time_ratio=ratios[len(ratios) // 2],
        memory_ratio=memory[len(memory) // 2],
        ok=ok,
    )


def run(command: list[str], *, cap_gib: float, cwd: Path) -> Run:
    """Wall seconds and peak RSS of one child process, under an address-space cap."""
    cap = int(cap_gib * GIB)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    start = time.perf_counter()
    child = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=limit,
        env={**os.environ, "NO_COLOR": "1"},
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    assert child.stderr is not None
    stderr = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    peak = usage.ru_maxrss / 1024
    if code != 0:
        last = stderr.strip().splitlines()[-1:] or [f"exit {code}"]
        note = "out of memory" if "memory" in last[0].lower() else last[0][:80]
        return Run(seconds, peak, ok=False, note=f"exit {code}: {note}")
    return Run(seconds, peak, ok=True)


def generate(rows: int, path: Path, *, seed: int) -> None:
    subprocess.run(
        [PYTHON, "-m", "bench.gen_big", "--rows", str(rows), "--seed", str(seed), "-o", str(path)],
        cwd=ROOT,
        check=True,
    )


Command = Callable[[Path, Path, Path], list[list[str]]]


def _commands() -> dict[str, Command]:
    """Each command's argument lists: (data file, labelled reference file, scratch dir)."""
    return {
        "reliability --json": lambda f, ref, d: [[CALIB, "reliability", str(f), "--json"]],
        "resample --negative-rate 0.1": lambda f, ref, d: [
            [CALIB, "resample", str(f), "--negative-rate", "0.1", "-o", str(d / "sample.parquet")]
        ],
        "recalibrate --method prior": lambda f, ref, d: [
            [
                CALIB,
                "recalibrate",
                str(f),
                "--method",
                "prior",
                "--negative-rate",
                "0.1",
                "-o",
                str(d / "prior.parquet"),
            ]
        ],
        "recalibrate isotonic: fit, then apply": lambda f, ref, d: [
            [
                CALIB,
                "recalibrate",
                "--fit",
                str(f),
                "--method",
                "isotonic",
                "--save-model",
                str(d / "iso.json"),
            ],
            [
                CALIB,
                "recalibrate",
                str(f),
                "--model",
                str(d / "iso.json"),
                "-o",
                str(d / "iso.parquet"),
            ],
        ],
        "recalibrate --method histogram: fit (exact)": lambda f, ref, d: [
            [
                CALIB,
                "recalibrate",
                "--fit",
                str(f),
                "--method",
                "histogram",
                "--save-model",
                str(d / "histogram.json"),
            ]
        ],
        "recalibrate --method auto: fit (cross-validated choice)": lambda f, ref, d: [
            [
                CALIB,
                "recalibrate",
                "--fit",
                str(f),
                "--method",
                "auto",
                "--save-model",
                str(d / "auto.json"),
            ]
        ],
        f"estimate-shift --batch-col day ({BATCHES} batches)": lambda f, ref, d: [
            [
                CALIB,
                "estimate-shift",
                "--reference",
                str(ref),
                "--target",
                str(f),
                "--batch-col",
                "day",
                "--json",
            ]
        ],
        f"estimate-shift --batch-col day -o ({BATCHES} batches, rows written)": lambda f, ref, d: [
            [
                CALIB,
                "estimate-shift",
                "--reference",
                str(ref),
                "--target",
                str(f),
                "--batch-col",
                "day",
                "-o",
                str(d / "shift.parquet"),
            ]
        ],
        f"rerank-strata --strata-col day ({BATCHES} strata)": lambda f, ref, d: [
            [
                CALIB,
                "rerank-strata",
                "--reference",
                str(ref),
                "--target",
                str(f),
                "--strata-col",
                "day",
                "-o",
                str(d / "rerank.parquet"),
            ]
        ],
    }


def run_all_steps(steps: list[list[str]], *, cap_gib: float, cwd: Path) -> Run:
    """A command made of several processes (fit, then apply): total time, largest peak."""
    total, peak = 0.0, 0.0
    for step in steps:
        result = run(step, cap_gib=cap_gib, cwd=cwd)
        total += result.seconds
        peak = max(peak, result.peak_mib)
        if not result.ok:
            return Run(total, peak, ok=False, note=result.note)
    return Run(total, peak, ok=True)


def _data(kept: Path | None, scratch: Path, name: str, rows: int, *, seed: int) -> Path:
    """A generated file: ``kept/name`` when given and present, else generated in scratch."""
    if kept is not None and (kept / name).exists():
        return kept / name
    path = scratch / name
    generate(rows, path, seed=seed)
    return path


def _median(runs: list[Run]) -> Run:
    """The run of median time (failures first: one failure fails the command)."""
    failed = [r for r in runs if not r.ok]
    if failed:
        return failed[0]
    ordered = sorted(runs, key=lambda r: r.seconds)
    middle = ordered[len(ordered) // 2]
    return Run(middle.seconds, max(r.peak_mib for r in runs), ok=True)


def _size(text: str) -> int:
    return int(float(text))


def _label(rows: int) -> str:
    exponent = len(str(rows)) - 1
    return f"1e{exponent}" if rows == 10**exponent else f"{rows:,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1e5,1e6,1e7,1e8")
    parser.add_argument("--quick", action="store_true", help="sizes 1e5 and 1e6 only")
    parser.add_argument("--reference-rows", type=_size, default=10_000_000)
    parser.add_argument("--cap-gib", type=float, default=12.0)
    parser.add_argument("--only", action="append", default=[], help="commands containing this")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="reuse rows_N.parquet and reference.parquet found here (generated with the same "
        "seeds) instead of generating them; they are kept",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command (median)")
    parser.add_argument(
        "--pairs",
        type=int,
        default=5,
        help="runs of reliability and each reference in turn (median of the pairs' ratios)",
    )
    args = parser.parse_args()
    sizes = [_size(s) for s in ("1e5,1e6" if args.quick else args.sizes).split(",")]
    reference_rows = min(args.reference_rows, max(sizes))
    commands = {
        name: build
        for name, build in _commands().items()
        if not args.only or any(word in name for word in args.only)
    }

    # the bytecode an installed calib has (an editable install under PYTHONDONTWRITEBYTECODE
    # compiles every changed module at each start: 10-20 ms that no user pays)
    compileall.compile_dir(ROOT / "calib_cli", quiet=1)
    results: dict[str, dict[int, Run]] = {name: {} for name in commands}
    references: dict[str, Paired] = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as scratch_dir:
        scratch = Path(scratch_dir)
        reference = _data(args.data_dir, scratch, "reference.parquet", reference_rows, seed=1)
        for rows in sizes:
            data = _data(args.data_dir, scratch, f"rows_{rows}.parquet", rows, seed=0)
            for name, build in commands.items():
                outputs = scratch / "out"
                outputs.mkdir(exist_ok=True)
                results[name][rows] = _median(
                    [
                        run_all_steps(
                            build(data, reference, outputs), cap_gib=args.cap_gib, cwd=ROOT
                        )
                        for _ in range(args.repeat)
                    ]
                )
                for leftover in outputs.iterdir():
                    leftover.unlink()
                print(
                    f"  {name} at {_label(rows)}: {results[name][rows].cell()}",
                    file=sys.stderr,
                    flush=True,
                )
            scripts = []
            if "reliability --json" not in commands:
                pass
            elif rows == 10_000_000 or (rows == max(sizes) and 10_000_000 not in sizes):
                scripts.append(("sklearn", SKLEARN_SCRIPT))
            if rows == max(sizes) and "reliability --json" in commands:
                scripts += [("floor", POLARS_FLOOR_SCRIPT), ("plan", SUMMARY_PLAN_SCRIPT)]
            for kind, script in scripts:
                # calib and the reference in turn, the ratio taken pair by pair: the
                # machine's speed drifts over a run, and a pair sees the same speed
                calib_command = [CALIB, "reliability", str(data), "--json"]
                reference_command = [PYTHON, "-c", script, str(data)]
                references[f"{kind}@{rows}"] = _paired(
                    [
                        (
                            run(calib_command, cap_gib=args.cap_gib, cwd=ROOT),
                            run(reference_command, cap_gib=args.cap_gib, cwd=ROOT),
                        )
                        for _ in range(args.pairs)
                    ]
                )
            if data.parent == scratch:
                data.unlink()

    largest = max(sizes)
    print(
        f"Generated Parquet files (id, score, label, day; {BATCHES} days; about 3% positive); "
        f"the reference for estimate-shift and rerank-strata has {reference_rows:,} rows. "
        f"Each cell: wall seconds, peak memory; address space capped at {args.cap_gib:g} GiB.\n"
    )
    print(
        "| command | " + " | ".join(_label(r) for r in sizes) + " | under 2 GiB at "
        f"{_label(largest)} |"
    )
    print("|---|" + "---|" * len(sizes) + "---|")
    for name in commands:
        row = results[name]
        big = row[largest]
        verdict = "yes" if big.ok and big.peak_mib < 2048 else "**no**"
        print(f"| `{name}` | " + " | ".join(row[r].cell() for r in sizes) + f" | {verdict} |")

    if len(sizes) >= 2:
        low, high = sorted(sizes)[-2:]
        print(f"\nHow cost grows, between {_label(low)} and {_label(high)} rows:\n")
        print("| command | seconds per 1e7 rows | memory growth, MiB per 1e7 rows |")
        print("|---|---|---|")
        for name in commands:
            a, b = results[name][low], results[name][high]
            if a.ok and b.ok:
                scale = 1e7 / (high - low)
                print(
                    f"| `{name}` | {(b.seconds - a.seconds) * scale:.2f} | "
                    f"{(b.peak_mib - a.peak_mib) * scale:.1f} |"
                )
            else:
                print(f"| `{name}` | failed | failed |")

    print(
        "\nAgainst the tools users pick instead (same run; calib and the reference in turn, "
        "the ratios the medians of the pairs'):\n"
    )
    print("| comparison | calib | reference | ratio (time) | ratio (peak memory) | target |")
    print("|---|---|---|---|---|---|")
    for key, pair in references.items():
        kind, rows_text = key.split("@")
        rows = int(rows_text)
        ours, reference_run = pair.ours, pair.theirs
        ratio_t = f"{pair.time_ratio:.2f}" if pair.ok else "n/a"
        ratio_m = f"{pair.memory_ratio:.2f}" if pair.ok else "n/a"
        if kind == "sklearn":
            what = f"`reliability` vs pyarrow + scikit-learn script, {_label(rows)} rows"
            target = "time <= 0.25, memory <= 0.4"
        elif kind == "floor":
            what = (
                f"`reliability` vs Polars streaming group-by of a 1e5-cell grid by label, "
                f"{_label(rows)} rows"
            )
            target = "time <= 3"
        else:
            what = (
                f"`reliability` vs Polars streaming group-by of the summary's sums "
                f"(`summary_plan`, no sub-cells), {_label(rows)} rows"
            )
            target = "none (context)"
        print(
            f"| {what} | {ours.cell()} | {reference_run.cell()} | {ratio_t} | {ratio_m} | "
            f"{target} |"
        )


if __name__ == "__main__":
    main()
