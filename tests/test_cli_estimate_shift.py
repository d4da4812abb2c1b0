"""`calib estimate-shift` end to end through the installed command.

Each run here checks the command-line contract (where tables, JSON and warnings go, exit
codes, exact error lines, standard input) and that the options reach the workflow: its
report and rows equal those of :func:`run_estimate_shift` called in-process with the same
options. The figures themselves (one call per batch, tiny targets, intervals, the two
engines alike) are checked in-process in tests/test_workflows_estimate_shift.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli.report.payloads import dumps, estimate_shift_payload
from calib_cli.types import JsonValue
from calib_cli.workflows.estimate_shift import EstimateShiftRequest, run_estimate_shift
from tests.conftest import SAMPLE_DATA, RunCalib

REFERENCE = SAMPLE_DATA / "transactions.csv"
BATCHES = SAMPLE_DATA / "shifted_batch.csv"
FAST = ["--bootstrap", "40", "--seed", "5"]


def _in_process(request: EstimateShiftRequest, warnings: list[str] | None = None) -> JsonValue:
    """The workflow's report for ``request`` (``FAST``'s bootstrap and seed), as the command
    prints it."""
    warn = warnings.append if warnings is not None else (lambda message: None)
    result = run_estimate_shift(request, warn=warn)
    parsed: JsonValue = json.loads(dumps(estimate_shift_payload(result)))
    return parsed


def test_tables_on_stdout_and_a_report_equal_to_the_workflow_s(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    """Without -o the tables are the product (stdout); --report holds every batch's keys and
    the workflow's figures, which track the batches' true rates."""
    report = tmp_path / "r.json"
    done = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(REFERENCE),
            "--target",
            str(BATCHES),
            "--batch-col",
            "day",
            "--report",
            str(report),
            *FAST,
        ]
    )
    assert done.returncode == 0, done.stderr
    assert "Positive rate of" in done.stdout.decode()
    # The sample batches are label shift: the only warnings are the disagreements with PCC.
    lines = done.stderr.decode().splitlines()
    assert lines and all(line.startswith("warning: batch ") and "PCC" in line for line in lines)
    figures = json.loads(report.read_text())
    assert figures == _in_process(
        EstimateShiftRequest(
            reference=str(REFERENCE), target=str(BATCHES), batch_col="day", n_bootstrap=40, seed=5
        )
    )
    assert figures["batch_col"] == "day"
    days = sorted(pl.read_csv(BATCHES)["day"].unique().to_list())
    assert [b["batch"] for b in figures["batches"]] == days
    for batch in figures["batches"]:
        for key in (
            "prevalence",
            "ci_low",
            "ci_high",
            "reference_prevalence",
            "n",
            "method",
            "converged",
            "n_iter",
            "reference_auc",
            "fit_pvalue",
        ):
            assert key in batch
        assert batch["ci_low"] <= batch["true_prevalence"] <= batch["ci_high"]
        assert abs(batch["error"]) < 0.02
        assert batch["reference_prevalence"] == pytest.approx(0.02555, abs=1e-4)


def test_output_rows_calibrated_and_decided_with_tables_on_stderr(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """With -o the tables go to stderr; --engine streaming, --weight-col and --costs reach the
    workflow: the rows and report equal the in-memory engine's, in-process."""
    out, report = tmp_path / "out.csv", tmp_path / "r.json"
    done = invoke_calib(
        [
            "estimate-shift",
            "--reference",
            str(REFERENCE),
            "--weight-col",
            "weight",
            "--target",
            str(BATCHES),
            "--batch-col",
            "day",
            "--costs",
            "1:20",
            "-o",
            str(out),
            "--report",
            str(report),
            "--engine",
            "streaming",
            *FAST,
        ]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    assert "Positive rate of" in done.stderr.decode()
    assert "Decisions at the Bayes threshold" in done.stderr.decode()
    memory_out = tmp_path / "memory.csv"
    figures = json.loads(report.read_text())
    assert figures == _in_process(
        EstimateShiftRequest(
            reference=str(REFERENCE),
            weight_col="weight",
            target=str(BATCHES),
            batch_col="day",
            costs="1:20",
            output=str(memory_out),
            engine="memory",
            n_bootstrap=40,
            seed=5,
        )
    )
    assert out.read_bytes() == memory_out.read_bytes()
    written = pl.read_csv(out, infer_schema=False)
    original = pl.read_csv(BATCHES, infer_schema=False)
    assert written.columns == [*original.columns, "calibrated", "decision"]
    assert written.select(original.columns).equals(original)
    frame = pl.read_csv(out)
    threshold = 1 / 21
    np.testing.assert_array_equal(
        frame["decision"].to_numpy(), (frame["calibrated"].to_numpy() >= threshold).astype(int)
    )
    for batch in figures["batches"]:
        decision = batch["decision"]
        assert decision["threshold"] == pytest.approx(threshold)
        rows = frame.filter(pl.col("day") == batch["batch"])
        assert decision["flagged_shifted"] == pytest.approx(rows["decision"].mean())
    # re-estimating the prior lowers the realised cost once the rate has moved a lot
    last = figures["batches"][-1]["decision"]
    assert last["realised_cost_shifted"] < last["realised_cost_static"]


def test_json_on_stdout_warnings_on_stderr_and_a_target_on_standard_input(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    """Uninformative scores: each warning of the workflow is a `warning:` line on stderr, the
    JSON on stdout and the -o file are the workflow's. The target comes on standard input
    (read into memory although --engine streaming is asked), and --method mle --ci-method
    profile reach the workflow."""
    rng = np.random.default_rng(2)
    pl.DataFrame(
        {"score": rng.random(3000), "label": (rng.random(3000) < 0.1).astype(int)}
    ).write_csv(tmp_path / "ref.csv")
    pl.DataFrame({"score": rng.random(1000)}).write_csv(tmp_path / "tgt.csv")
    out = tmp_path / "o.csv"
    done = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(tmp_path / "ref.csv"),
            "--target",
            "-",
            "--json",
            "-o",
            str(out),
            "--engine",
            "streaming",
            "--method",
            "mle",
            "--ci-method",
            "profile",
            *FAST,
        ],
        stdin=(tmp_path / "tgt.csv").read_bytes(),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    warnings: list[str] = []
    from_file = tmp_path / "from_file.csv"
    assert result == _in_process(
        EstimateShiftRequest(
            reference=str(tmp_path / "ref.csv"),
            target=str(tmp_path / "tgt.csv"),
            output=str(from_file),
            method="mle",
            ci_method="profile",
            n_bootstrap=40,
            seed=5,
        ),
        warnings,
    )
    assert out.read_bytes() == from_file.read_bytes()
    assert result["ci_method"] == "profile"
    assert result["ci_high"] - result["ci_low"] > 0.5
    assert warnings
    stderr = " ".join(done.stderr.decode().split())  # Rich wraps long lines at 160 columns
    for warning in warnings:
        assert f"warning: {warning}" in stderr


def test_usage_errors_are_exit_2_with_one_error_line(invoke_calib: RunCalib) -> None:
    """A bad value found by calib (--costs) and one refused by the option parser (the bound
    of --map-power). The other usage errors are raised in-process by the workflow
    (tests/test_workflows_estimate_shift.py)."""
    base = ["estimate-shift", "--reference", str(REFERENCE), "--target", str(BATCHES)]
    costs = invoke_calib([*base, "--costs", "1-20"])
    assert (costs.returncode, costs.stdout) == (2, b"")
    assert costs.stderr.decode() == "error: --costs must look like FP:FN (e.g. 1:20), got '1-20'\n"
    power = invoke_calib([*base, "--map-power", "0.5"])
    assert (power.returncode, power.stdout) == (2, b"")
    assert len(power.stderr.decode().splitlines()) == 1
    assert power.stderr.decode().startswith(
        "error: calib estimate-shift: invalid value for '--map-power'"
    )


def test_bad_input_is_exit_65_and_writes_nothing(invoke_calib: RunCalib, tmp_path: Path) -> None:
    """A score outside [0, 1] deep in the file, with the streaming engine; both engines refuse
    it with the same line (in-process, tests/test_workflows_estimate_shift.py)."""
    bad = tmp_path / "bad.csv"
    lines = BATCHES.read_text().splitlines()
    lines[12000] = lines[12000].replace(lines[12000].split(",")[2], "1.7")
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.csv"
    done = invoke_calib(
        [
            "estimate-shift",
            "--reference",
            str(REFERENCE),
            "--target",
            str(bad),
            "-o",
            str(out),
            "--engine",
            "streaming",
            *FAST,
        ]
    )
    assert (done.returncode, done.stdout) == (65, b"")
    assert done.stderr.decode() == (
        f"error: {bad}: column 'score' has 1 value outside [0, 1] (first at row 12000: 1.7)\n"
    )
    assert not out.exists()


def test_summaries_in_place_of_rows_report_the_workflow_s_figures(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """--reference-summary and --target-summary wired (the figures against the rows:
    tests/test_shift_summary.py); -o with a target summary is a usage error."""
    from calib_cli.workflows.summarize import SummarizeRequest, run_summarize

    ref, tgt = tmp_path / "ref.parquet", tmp_path / "days.parquet"
    run_summarize(SummarizeRequest(files=(str(REFERENCE),), output=str(ref)))
    run_summarize(SummarizeRequest(files=(str(BATCHES),), output=str(tgt), by="day"))
    options = ["--reference-summary", str(ref), "--target-summary", str(tgt), "--batch-col", "day"]
    done = invoke_calib(["estimate-shift", *options, "--json", *FAST])
    assert done.returncode == 0, done.stderr
    expected = _in_process(
        EstimateShiftRequest(
            reference_summaries=(str(ref),),
            target_summaries=(str(tgt),),
            batch_col="day",
            n_bootstrap=40,
            seed=5,
        )
    )
    assert json.loads(done.stdout) == expected
    refused = invoke_calib(["estimate-shift", *options, "-o", str(tmp_path / "out.csv")])
    assert refused.returncode == 2
    assert refused.stderr.decode().startswith("error: -o writes the target's rows")
    assert not (tmp_path / "out.csv").exists()


def test_map_nodes_are_bounded(run_calib: RunCalib) -> None:
    """The fit's time grows about as the cube of the nodes (200: 44 s, 500: over 15 min), so
    --map-nodes 500 ran for a quarter of an hour before anyone saw a number."""
    done = run_calib(["estimate-shift", "--reference", str(SAMPLE_DATA / "transactions.csv"),
                      "--target", str(SAMPLE_DATA / "shifted_batch.csv"), "--method", "map",
                      "--map-nodes", "500"])  # fmt: skip
    assert done.returncode == 2 and b"must be 2 to 100 (got 500)" in done.stderr
