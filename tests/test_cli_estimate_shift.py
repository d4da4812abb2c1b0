"""`calib estimate-shift` end to end through the installed command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import SAMPLE_DATA, RunCalib

REFERENCE = SAMPLE_DATA / "transactions.csv"
BATCHES = SAMPLE_DATA / "shifted_batch.csv"
FAST = ["--bootstrap", "40", "--seed", "5"]


def test_one_call_with_batch_col_equals_one_call_per_batch(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    done = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(REFERENCE),
            "--target",
            str(BATCHES),
            "--batch-col",
            "day",
            "--json",
            *FAST,
        ]
    )
    assert done.returncode == 0, done.stderr
    together = json.loads(done.stdout)
    assert together["batch_col"] == "day"
    days = sorted(pl.read_csv(BATCHES)["day"].unique().to_list())
    assert [b["batch"] for b in together["batches"]] == days
    for batch in together["batches"]:
        alone = tmp_path / f"{batch['batch']}.parquet"
        pl.read_csv(BATCHES).filter(pl.col("day") == batch["batch"]).write_parquet(alone)
        single = run_calib(
            [
                "estimate-shift",
                "--reference",
                str(REFERENCE),
                "--target",
                str(alone),
                "--json",
                *FAST,
            ]
        )
        assert single.returncode == 0, single.stderr
        assert json.loads(single.stdout) == {k: v for k, v in batch.items() if k != "batch"}


def test_estimates_track_the_true_rates_and_report_the_required_keys(
    run_calib: RunCalib, tmp_path: Path
) -> None:
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
    assert "Positive rate of" in done.stdout.decode()  # the report is the product: stdout
    for batch in json.loads(report.read_text())["batches"]:
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


def test_output_rows_calibrated_and_decided(run_calib: RunCalib, tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
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
            "--costs",
            "1:20",
            "-o",
            str(out),
            "--report",
            str(report),
            *FAST,
        ]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""  # with -o the tables go to stderr
    assert "Decisions at the Bayes threshold" in done.stderr.decode()
    frame = pl.read_csv(out)
    assert frame.columns == [*pl.read_csv(BATCHES).columns, "calibrated", "decision"]
    threshold = 1 / 21
    np.testing.assert_array_equal(
        frame["decision"].to_numpy(), (frame["calibrated"].to_numpy() >= threshold).astype(int)
    )
    for batch in json.loads(report.read_text())["batches"]:
        decision = batch["decision"]
        assert decision["threshold"] == pytest.approx(threshold)
        rows = frame.filter(pl.col("day") == batch["batch"])
        assert decision["flagged_shifted"] == pytest.approx(rows["decision"].mean())
        # re-estimating the prior lowers the realised cost once the rate has moved a lot
    last = json.loads(report.read_text())["batches"][-1]["decision"]
    assert last["realised_cost_shifted"] < last["realised_cost_static"]


def test_uninformative_scores_warn_and_give_a_wide_interval(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    rng = np.random.default_rng(2)
    pl.DataFrame(
        {"score": rng.random(3000), "label": (rng.random(3000) < 0.1).astype(int)}
    ).write_csv(tmp_path / "ref.csv")
    pl.DataFrame({"score": rng.random(1000)}).write_csv(tmp_path / "tgt.csv")
    done = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(tmp_path / "ref.csv"),
            "--target",
            str(tmp_path / "tgt.csv"),
            "--json",
            *FAST,
        ]
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ci_high"] - result["ci_low"] > 0.5
    assert "warning:" in done.stderr.decode()


@pytest.mark.parametrize("rows", [["0.3"], ["0.2", "0.2", "0.2", "0.2"]])
def test_tiny_and_constant_targets(run_calib: RunCalib, tmp_path: Path, rows: list[str]) -> None:
    target = tmp_path / "t.csv"
    target.write_text("score\n" + "\n".join(rows) + "\n")
    done = run_calib(
        ["estimate-shift", "--reference", str(REFERENCE), "--target", str(target), "--json", *FAST]
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["n"] == len(rows)
    assert 0 <= result["ci_low"] <= result["prevalence"] <= result["ci_high"] <= 1


def test_reference_without_positives_is_exit_65(run_calib: RunCalib, tmp_path: Path) -> None:
    (tmp_path / "ref.csv").write_text("score,label\n0.1,0\n0.4,0\n")
    done = run_calib(
        ["estimate-shift", "--reference", str(tmp_path / "ref.csv"), "--target", str(BATCHES)]
    )
    assert done.returncode == 65
    assert done.stderr.decode().startswith("error: ")
    assert "no positive rows" in done.stderr.decode()


def test_bad_costs_are_a_usage_error(run_calib: RunCalib) -> None:
    done = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(REFERENCE),
            "--target",
            str(BATCHES),
            "--costs",
            "1-20",
        ]
    )
    assert done.returncode == 2
    assert "--costs must look like FP:FN" in done.stderr.decode()


def test_profile_likelihood_interval_for_mle(run_calib: RunCalib) -> None:
    done = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(REFERENCE),
            "--target",
            str(BATCHES),
            "--method",
            "mle",
            "--ci-method",
            "profile",
            "--json",
            *FAST,
        ]
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ci_method"] == "profile"
    assert result["ci_low"] < result["prevalence"] < result["ci_high"]
    refused = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(REFERENCE),
            "--target",
            str(BATCHES),
            "--method",
            "em",
            "--ci-method",
            "profile",
        ]
    )
    assert refused.returncode == 2
    assert refused.stderr.decode().startswith("error: ")


def test_json_with_an_output_file_and_map_power_bounds(run_calib: RunCalib, tmp_path: Path) -> None:
    out = tmp_path / "o.csv"
    done = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(REFERENCE),
            "--target",
            str(BATCHES),
            "--json",
            "-o",
            str(out),
            *FAST,
        ]
    )
    assert done.returncode == 0, done.stderr
    assert "prevalence" in json.loads(done.stdout)
    assert out.exists()
    both = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(REFERENCE),
            "--target",
            str(BATCHES),
            "--json",
            "-o",
            "-",
        ]
    )
    assert both.returncode == 2
    power = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(REFERENCE),
            "--target",
            str(BATCHES),
            "--map-power",
            "0.5",
        ]
    )
    assert power.returncode == 2


# ------------------------------------------------------------------ engines (issue 10)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_streaming_engine_gives_the_memory_engine_s_report_and_rows(
    run_calib: RunCalib, tmp_path: Path, suffix: str
) -> None:
    """20,000 rows span one counting chunk either way: identical JSON, identical output bytes
    for CSV (the same table for Parquet), the input's columns and row order first."""
    target = BATCHES
    if suffix == ".parquet":
        target = tmp_path / "batches.parquet"
        pl.read_csv(BATCHES).write_parquet(target)
    reports = {}
    for engine in ("memory", "streaming"):
        done = run_calib(
            [
                "estimate-shift",
                "--reference",
                str(REFERENCE),
                "--weight-col",
                "weight",
                "--target",
                str(target),
                "--batch-col",
                "day",
                "--costs",
                "1:20",
                "--json",
                "-o",
                str(tmp_path / f"out_{engine}{suffix}"),
                "--engine",
                engine,
                *FAST,
            ]
        )
        assert done.returncode == 0, done.stderr
        reports[engine] = json.loads(done.stdout)
    assert reports["memory"] == reports["streaming"]
    memory_out, streaming_out = (tmp_path / f"out_{e}{suffix}" for e in ("memory", "streaming"))
    if suffix == ".csv":
        assert memory_out.read_bytes() == streaming_out.read_bytes()
        written = pl.read_csv(streaming_out, infer_schema=False)
        original = pl.read_csv(target, infer_schema=False)
    else:
        written = pl.read_parquet(streaming_out)
        original = pl.read_parquet(target)
        assert pl.read_parquet(memory_out).equals(written)
    assert written.columns == [*original.columns, "calibrated", "decision"]
    assert written.select(original.columns).equals(original)


def test_streaming_engine_refuses_bad_input_like_the_memory_engine(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.csv"
    lines = BATCHES.read_text().splitlines()
    lines[12000] = lines[12000].replace(lines[12000].split(",")[2], "1.7")
    bad.write_text("\n".join(lines) + "\n")
    errors = []
    for engine in ("memory", "streaming"):
        out = tmp_path / f"out_{engine}.csv"
        done = run_calib(
            [
                "estimate-shift",
                "--reference",
                str(REFERENCE),
                "--target",
                str(bad),
                "-o",
                str(out),
                "--engine",
                engine,
                *FAST,
            ]
        )
        assert done.returncode == 65
        assert not out.exists()
        errors.append(done.stderr.decode())
    assert errors[0] == errors[1]
    assert "column 'score' has 1 value outside [0, 1] (first at row 12000: 1.7)" in errors[1]


def test_streaming_engine_reads_a_target_on_standard_input_in_memory(
    run_calib: RunCalib,
) -> None:
    """Standard input cannot be read twice: it is read into memory whatever the engine."""
    reports = []
    for engine in ("memory", "streaming"):
        done = run_calib(
            [
                "estimate-shift",
                "--reference",
                str(REFERENCE),
                "--target",
                "-",
                "--json",
                "--engine",
                engine,
                *FAST,
            ],
            stdin=BATCHES.read_bytes(),
        )
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(done.stdout))
    assert reports[0] == reports[1]
