"""`calib recalibrate` end to end through the installed command.

Each test spawns as few ``calib`` processes as the contract it checks needs (a process costs
about a second to start): the numbers and the refusals of the workflow are checked in-process in
``test_workflows_recalibrate.py`` (every method saved and applied, chains in both orders, each
bad artifact field, each option combination refused, separable data, unknown strata); here one
run per behaviour shows that the command wires it, often compared with the in-process result.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score

from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.resample import ResampleRequest, run_resample
from tests.conftest import RunCalib


def _population(n: int, seed: int) -> pl.DataFrame:
    """Rare events (about 2% positive) driven by three features through a logistic model."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    p = expit(-4.6 + x @ np.array([1.2, -0.8, 0.5]))
    return pl.DataFrame(
        {
            "id": np.arange(n),
            "x1": x[:, 0],
            "x2": x[:, 1],
            "x3": x[:, 2],
            "label": (rng.random(n) < p).astype(np.int64),
        }
    )


@pytest.mark.slow  # an experiment on 100,000 rows: make test-slow (CI) runs it
def test_classic_negative_sampling_experiment(run_calib: RunCalib, tmp_path: Path) -> None:
    train, holdout = _population(100_000, seed=1), _population(100_000, seed=2)
    base_rate = holdout["label"].mean()
    assert 0.01 < base_rate < 0.03  # type: ignore[operator]
    train_path = tmp_path / "train.parquet"
    train.write_parquet(train_path)
    sample_path = tmp_path / "sample.parquet"
    done = run_calib(
        [
            "resample",
            str(train_path),
            "-o",
            str(sample_path),
            "--negative-rate",
            "0.1",
            "--key-col",
            "id",
            "--seed",
            "42",
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr

    features = ["x1", "x2", "x3"]
    sample = pl.read_parquet(sample_path)
    sampled_model = LogisticRegression(C=1e6, max_iter=1000).fit(
        sample[features].to_numpy(), sample["label"].to_numpy()
    )
    full_model = LogisticRegression(C=1e6, max_iter=1000).fit(
        train[features].to_numpy(), train["label"].to_numpy()
    )
    raw = sampled_model.predict_proba(holdout[features].to_numpy())[:, 1]
    scored = tmp_path / "scored.csv"
    holdout.with_columns(pl.Series("score", raw)).write_csv(scored)

    out = tmp_path / "calibrated.csv"
    report = tmp_path / "report.json"
    done = run_calib(
        [
            "recalibrate",
            str(scored),
            "--method",
            "prior",
            "--sampling-record",
            f"{sample_path}.sampling.json",
            "-o",
            str(out),
            "--report",
            str(report),
        ]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""  # the rows go to -o, the tables to stderr
    calibrated = pl.read_csv(out)["calibrated"].to_numpy()
    y = holdout["label"].to_numpy()

    assert raw.mean() > 3 * base_rate  # type: ignore[operator]
    assert abs(calibrated.mean() - base_rate) < 0.005  # type: ignore[operator]
    full = full_model.predict_proba(holdout[features].to_numpy())[:, 1]
    assert log_loss(y, calibrated) < log_loss(y, raw)
    assert log_loss(y, calibrated) < 1.02 * log_loss(y, full)
    assert roc_auc_score(y, calibrated) == pytest.approx(roc_auc_score(y, raw), abs=1e-12)

    figures = json.loads(report.read_text())
    assert figures["method"] == "prior"
    assert figures["input"]["after"]["log_loss"] == pytest.approx(log_loss(y, calibrated), 1e-9)
    assert figures["input"]["mean_score_before"] == pytest.approx(raw.mean(), 1e-12)


@pytest.fixture
def overconfident(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(3)
    paths = {}
    for name, n in (("fit", 6000), ("apply", 4000)):
        z = rng.normal(-2.0, 1.5, n)
        y = (rng.random(n) < expit(z)).astype(np.int64)
        frame = pl.DataFrame(
            {
                "id": np.arange(n),
                "score": expit(2.5 * z),
                "label": y,
                "w": rng.choice([1.0, 2.0], n),
            }
        )
        paths[name] = tmp_path / f"{name}.csv"
        frame.write_csv(paths[name])
    return paths


def test_model_applies_quietly_with_the_bytes_of_the_in_process_fit(
    invoke_calib: RunCalib, overconfident: dict[str, Path], tmp_path: Path
) -> None:
    # every method's save/load/apply round trip: test_workflows_recalibrate.py
    model = tmp_path / "m.json"
    direct = tmp_path / "direct.csv"
    run_recalibrate(
        RecalibrateRequest(
            file=str(overconfident["apply"]),
            fit=str(overconfident["fit"]),
            method="isotonic",
            weight_col="w",
            save_model=str(model),
            output=str(direct),
        )
    )
    applied = tmp_path / "applied.csv"
    done = invoke_calib(
        [
            "recalibrate",
            str(overconfident["apply"]),
            "--model",
            str(model),
            "-o",
            str(applied),
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == (b"", b"")  # -q silences the tables and warnings
    assert applied.read_bytes() == direct.read_bytes()


def test_fit_without_input_saves_the_chain_the_workflow_saves(
    invoke_calib: RunCalib, overconfident: dict[str, Path], tmp_path: Path
) -> None:
    # both --fit-data orders, in-process: test_workflows_recalibrate.py
    model = tmp_path / "chain.json"
    done = invoke_calib(
        [
            "recalibrate",
            "--fit",
            str(overconfident["fit"]),
            "--method",
            "platt",
            "--weight-col",
            "w",
            "--negative-rate",
            "0.5",
            "--fit-data",
            "sampled",
            "--save-model",
            str(model),
        ]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""  # no INPUT: no rows to write
    assert f"saved calibrator (platt -> prior): {model}" in done.stderr.decode()
    artifact = json.loads(model.read_text())
    assert artifact["kind"] == "chain"
    assert [s["kind"] for s in artifact["params"]["steps"]] == ["platt", "prior"]
    assert artifact["fitted_on"]["fit_data"] == "sampled"
    assert artifact["fitted_on"]["columns"]["weight"] == "w"
    in_process = tmp_path / "in_process.json"
    run_recalibrate(
        RecalibrateRequest(
            fit=str(overconfident["fit"]),
            method="platt",
            weight_col="w",
            negative_rate=0.5,
            fit_data="sampled",
            save_model=str(in_process),
        )
    )
    assert artifact == json.loads(in_process.read_text())


def test_auto_prints_the_comparison_and_cross_fit_gives_out_of_fold_scores(
    invoke_calib: RunCalib, overconfident: dict[str, Path], tmp_path: Path
) -> None:
    report = tmp_path / "r.json"
    done = invoke_calib(
        [
            "recalibrate",
            str(overconfident["fit"]),
            "--cross-fit",
            "4",
            "--method",
            "auto",
            "-o",
            str(tmp_path / "oof.parquet"),
            "--report",
            str(report),
            "--seed",
            "9",
        ]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    stderr = done.stderr.decode()
    assert "cross-validated comparison" in stderr and "chosen" in stderr
    figures = json.loads(report.read_text())
    assert figures["cross_fit"] == 4
    assert {row["method"] for row in figures["auto"]["candidates"]} == {
        "platt",
        "isotonic",
        "beta",
        "histogram",
    }
    assert figures["input"]["after"]["log_loss"] < figures["input"]["before"]["log_loss"]
    # the same seed gives the same out-of-fold scores (in-process, to another format)
    again = tmp_path / "again.csv"
    run_recalibrate(
        RecalibrateRequest(
            file=str(overconfident["fit"]),
            cross_fit_folds=4,
            method="auto",
            output=str(again),
            seed=9,
        )
    )
    frame = pl.read_parquet(tmp_path / "oof.parquet")
    assert pl.read_csv(again)["calibrated"].to_list() == frame["calibrated"].to_list()


def test_train_and_target_priors_round_trip(invoke_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "s.csv"
    scores = [0.0, 1e-12, 0.2, 0.5, 0.9, 1.0]
    pl.DataFrame({"score": scores}).write_csv(source)
    there = tmp_path / "there.csv"
    back = tmp_path / "back.csv"
    run_recalibrate(
        RecalibrateRequest(file=str(source), train_prior=0.5, target_prior=0.02, output=str(there))
    )
    done = invoke_calib(
        [
            "recalibrate",
            str(there),
            "--score-col",
            "calibrated",
            "--output-col",
            "back",
            "--train-prior",
            "0.02",
            "--target-prior",
            "0.5",
            "-o",
            str(back),
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr
    result = pl.read_csv(back)["back"].to_numpy()
    np.testing.assert_allclose(result, scores, rtol=1e-14, atol=0)


def test_stratified_record_corrects_each_stratum(invoke_calib: RunCalib, tmp_path: Path) -> None:
    # the record of `calib resample --strata-col --rates-file` (end to end in
    # test_cli_resample.py); a stratum the record does not know: test_workflows_recalibrate.py
    rng = np.random.default_rng(4)
    n = 4000
    frame = pl.DataFrame(
        {
            "id": np.arange(n),
            "region": rng.choice(["n", "s"], n),
            "label": (rng.random(n) < 0.05).astype(np.int64),
        }
    )
    train = tmp_path / "t.csv"
    frame.write_csv(train)
    rates = tmp_path / "rates.csv"
    rates.write_text("stratum,negative_rate\nn,0.1\ns,0.5\n")
    run_resample(
        ResampleRequest(
            file=str(train),
            output=str(tmp_path / "x.csv"),
            strata_col="region",
            rates_file=str(rates),
        )
    )
    scored = tmp_path / "scored.csv"
    pl.DataFrame({"region": ["n", "s", "s"], "score": [0.5, 0.5, 0.0]}).write_csv(scored)
    out = tmp_path / "out.csv"
    done = invoke_calib(
        [
            "recalibrate",
            str(scored),
            "--sampling-record",
            str(tmp_path / "x.csv.sampling.json"),
            "-o",
            str(out),
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(
        pl.read_csv(out)["calibrated"].to_numpy(), [0.1 / 1.1, 0.5 / 1.5, 0.0], rtol=1e-15
    )


def test_bad_artifact_exits_65_naming_the_field_and_writes_nothing(
    invoke_calib: RunCalib, overconfident: dict[str, Path], tmp_path: Path
) -> None:
    # each field of an artifact that is checked (knots, schema, kind, fit diagnostics):
    # test_workflows_recalibrate.py
    model = tmp_path / "m.json"
    run_recalibrate(
        RecalibrateRequest(fit=str(overconfident["fit"]), method="isotonic", save_model=str(model))
    )
    document = json.loads(model.read_text())
    document["params"]["extra"] = 1
    model.write_text(json.dumps(document))
    done = invoke_calib(
        [
            "recalibrate",
            str(overconfident["apply"]),
            "--model",
            str(model),
            "-o",
            str(tmp_path / "o.csv"),
        ]
    )
    assert done.returncode == 65
    assert done.stdout == b""
    assert done.stderr.decode() == (
        f"error: {model}: params.extra is not a field of this artifact "
        "(known: x_knots, y_knots, eps, strict)\n"
    )
    assert not (tmp_path / "o.csv").exists()


def test_options_that_do_not_fit_together_exit_2(
    invoke_calib: RunCalib, overconfident: dict[str, Path]
) -> None:
    # every refused combination with its exact message: test_workflows_recalibrate.py
    done = invoke_calib(
        ["recalibrate", str(overconfident["apply"]), "--method", "prior", "-o", "-"]
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == b""
    assert done.stderr.decode() == (
        "error: nothing to do: give --sampling-record, --negative-rate, "
        "--train-prior/--target-prior, --fit, --model or --cross-fit\n"
    )


def test_drop_removes_rows_with_bad_labels_too(invoke_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "rb.csv"
    source.write_text("score,label\n0.2,0\n,1\n0.3,0\n1.5,1\n0.4,x\n0.5,1\n")
    done = invoke_calib(
        [
            *("recalibrate", str(source), "--negative-rate", "0.5", "-o", "-"),
            *("--on-invalid", "drop", "--max-invalid", "3"),
        ]
    )
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(done.stdout)["score"].to_list() == [0.2, 0.3, 0.5]
    assert (
        "dropped 3 invalid rows of 6 (score missing: 1, score outside [0, 1]: 1, label not 0/1: 1)"
        in done.stderr.decode()
    )


def test_fit_summary_saves_the_model_and_refuses_a_coarse_grid(
    invoke_calib: RunCalib, overconfident: dict[str, Path], tmp_path: Path
) -> None:
    """--fit-summary wired: the model the workflow fits from the summary, saved; a histogram
    on a 12-bit summary whose edges fall in cells of several scores refused with exit 65 and
    one line naming the bits (in-process checks: test_fit_summary.py)."""
    from calib_cli.workflows.summarize import SummarizeRequest, run_summarize

    summary = tmp_path / "s.parquet"
    run_summarize(SummarizeRequest(files=(str(overconfident["fit"]),), output=str(summary)))
    model = tmp_path / "m.json"
    done = invoke_calib(
        ["recalibrate", "--fit-summary", str(summary), "--method", "platt",
         "--save-model", str(model), "-q"]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = tmp_path / "expected.json"
    run_recalibrate(
        RecalibrateRequest(fit_summaries=(str(summary),), method="platt", save_model=str(expected))
    )
    assert json.loads(model.read_text()) == json.loads(expected.read_text())
    dense = tmp_path / "dense.parquet"  # 100 rows per 12-bit cell near 0.5
    rng = np.random.default_rng(5)
    scores = rng.uniform(0.45, 0.55, 100_000)
    labels = (rng.random(100_000) < scores).astype(np.int64)
    pl.DataFrame({"score": scores, "label": labels}).write_parquet(dense)
    summary = tmp_path / "dense_summary.parquet"
    run_summarize(SummarizeRequest(files=(str(dense),), output=str(summary)))
    refused = invoke_calib(
        ["recalibrate", "--fit-summary", str(summary), "--method", "histogram",
         "--save-model", str(tmp_path / "h.json")]
    )  # fmt: skip
    assert refused.returncode == 65
    lines = refused.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {summary}: --method histogram needs a summary on a grid")
    assert not (tmp_path / "h.json").exists()


def test_auto_streams_a_big_fit_file_through_the_installed_command(
    run_calib: RunCalib, overconfident: dict[str, Path], tmp_path: Path
) -> None:
    # the installed calib, --engine streaming on a CSV fit file: the comparison in hashed folds
    # with each log loss's bound, in the printed table and in the report, and the saved model
    # of the chosen method records how it was chosen
    model, report = tmp_path / "m.json", tmp_path / "r.json"
    args = ["recalibrate", "--fit", str(overconfident["fit"]), "--method", "auto"]
    args += ["--engine", "streaming", "--save-model", str(model), "--report", str(report)]
    done = run_calib(args)
    assert done.returncode == 0, done.stderr
    stderr = done.stderr.decode()
    assert "cross-validation on the summary's cells (hashed folds)" in stderr
    assert "bound" in stderr and "chosen" in stderr
    figures = json.loads(report.read_text())
    assert figures["auto"]["folds"] == "hashed" and figures["auto"]["n_folds"] == 5
    bounds = [row["cv_log_loss_bound"] for row in figures["auto"]["candidates"]]
    assert all(0.0 <= b < 1e-3 for b in bounds)
    saved = json.loads(model.read_text())
    assert saved["kind"] == figures["auto"]["chosen"]
    assert saved["fitted_on"]["engine"]["chosen_by"]["folds"] == "hashed"
