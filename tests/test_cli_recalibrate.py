"""`calib recalibrate` end to end through the installed command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score

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


@pytest.mark.parametrize("method", ["platt", "isotonic", "beta", "histogram"])
def test_save_load_apply_is_byte_identical_and_improves_log_loss(
    run_calib: RunCalib, overconfident: dict[str, Path], tmp_path: Path, method: str
) -> None:
    model = tmp_path / "m.json"
    direct = tmp_path / "direct.csv"
    done = run_calib(
        [
            "recalibrate",
            str(overconfident["apply"]),
            "--fit",
            str(overconfident["fit"]),
            "--method",
            method,
            "--weight-col",
            "w",
            "--save-model",
            str(model),
            "-o",
            str(direct),
        ]
    )
    assert done.returncode == 0, done.stderr
    applied = tmp_path / "applied.csv"
    done = run_calib(
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
    assert applied.read_bytes() == direct.read_bytes()
    artifact = json.loads(model.read_text())
    assert artifact["kind"] == method
    assert artifact["schema_version"] == 1
    assert artifact["fitted_on"]["rows"] == 6000
    frame = pl.read_csv(applied)
    y, before, after = (frame[c].to_numpy() for c in ("label", "score", "calibrated"))
    assert log_loss(y, after) < log_loss(y, before)


def test_auto_prints_the_comparison_and_cross_fit_gives_out_of_fold_scores(
    run_calib: RunCalib, overconfident: dict[str, Path], tmp_path: Path
) -> None:
    report = tmp_path / "r.json"
    done = run_calib(
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
    again = run_calib(
        [
            "recalibrate",
            str(overconfident["fit"]),
            "--cross-fit",
            "4",
            "--method",
            "auto",
            "-o",
            "-",
            "--seed",
            "9",
            "-q",
        ]
    )
    frame = pl.read_parquet(tmp_path / "oof.parquet")
    assert pl.read_csv(again.stdout)["calibrated"].to_list() == frame["calibrated"].to_list()


def test_prior_and_fitted_map_compose_in_one_chain(
    run_calib: RunCalib, overconfident: dict[str, Path], tmp_path: Path
) -> None:
    model = tmp_path / "chain.json"
    for order, kinds in (("population", ["prior", "platt"]), ("sampled", ["platt", "prior"])):
        done = run_calib(
            [
                "recalibrate",
                "--fit",
                str(overconfident["fit"]),
                "--method",
                "platt",
                "--negative-rate",
                "0.5",
                "--fit-data",
                order,
                "--save-model",
                str(model),
            ]
        )
        assert done.returncode == 0, done.stderr
        artifact = json.loads(model.read_text())
        assert artifact["kind"] == "chain"
        assert [s["kind"] for s in artifact["params"]["steps"]] == kinds


def test_train_and_target_priors_round_trip(run_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "s.csv"
    scores = [0.0, 1e-12, 0.2, 0.5, 0.9, 1.0]
    pl.DataFrame({"score": scores}).write_csv(source)
    there = tmp_path / "there.csv"
    back = tmp_path / "back.csv"
    assert (
        run_calib(
            [
                "recalibrate",
                str(source),
                "--train-prior",
                "0.5",
                "--target-prior",
                "0.02",
                "-o",
                str(there),
                "-q",
            ]
        ).returncode
        == 0
    )
    assert (
        run_calib(
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
        ).returncode
        == 0
    )
    result = pl.read_csv(back)["back"].to_numpy()
    np.testing.assert_allclose(result, scores, rtol=1e-14, atol=0)


def test_stratified_record_corrects_each_stratum(run_calib: RunCalib, tmp_path: Path) -> None:
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
    assert (
        run_calib(
            [
                "resample",
                str(train),
                "-o",
                str(tmp_path / "x.csv"),
                "--strata-col",
                "region",
                "--rates-file",
                str(rates),
                "-q",
            ]
        ).returncode
        == 0
    )
    scored = tmp_path / "scored.csv"
    pl.DataFrame({"region": ["n", "s", "s"], "score": [0.5, 0.5, 0.0]}).write_csv(scored)
    out = tmp_path / "out.csv"
    done = run_calib(
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
    unknown = tmp_path / "unknown.csv"
    pl.DataFrame({"region": ["e"], "score": [0.5]}).write_csv(unknown)
    done = run_calib(
        [
            "recalibrate",
            str(unknown),
            "--sampling-record",
            str(tmp_path / "x.csv.sampling.json"),
            "-o",
            str(out),
        ]
    )
    assert done.returncode == 65
    assert b"stratum 'e' (1 rows)" in done.stderr


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["params"]["y_knots"].__setitem__(1, None),
            "params.y_knots[1] must be a number",
        ),
        (lambda d: d["params"]["x_knots"].reverse(), "params.x_knots[1]"),
        (lambda d: d.__setitem__("schema_version", 9), "schema_version is 9"),
        (lambda d: d.__setitem__("kind", "magic"), 'kind is "magic"'),
        (lambda d: d["params"].pop("eps"), "params.eps is missing"),
        (
            lambda d: d["params"]["y_knots"].__setitem__(1, float("nan")),
            "params.y_knots[1] is not a finite number",
        ),
        (lambda d: d.__setitem__("schema_version", True), "schema_version is true"),
        (lambda d: d["params"].__setitem__("extra", 1), "params.extra is not a field"),
    ],
)
def test_bad_artifacts_are_refused_naming_the_field(
    run_calib: RunCalib,
    overconfident: dict[str, Path],
    tmp_path: Path,
    mutate: object,
    message: str,
) -> None:
    model = tmp_path / "m.json"
    assert (
        run_calib(
            [
                "recalibrate",
                "--fit",
                str(overconfident["fit"]),
                "--method",
                "isotonic",
                "--save-model",
                str(model),
                "-q",
            ]
        ).returncode
        == 0
    )
    document = json.loads(model.read_text())
    mutate(document)  # type: ignore[operator]
    model.write_text(json.dumps(document))
    done = run_calib(
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
    assert message in done.stderr.decode()
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--method", "platt"],
        ["--fit", "x.csv", "--model", "m.json"],
        ["--model", "m.json", "--method", "platt"],
        ["--method", "prior"],
        [],
    ],
)
def test_usage_errors(run_calib: RunCalib, overconfident: dict[str, Path], args: list[str]) -> None:
    done = run_calib(["recalibrate", str(overconfident["apply"]), *args, "-o", "-"])
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode().startswith("error: ")


def test_drop_removes_rows_with_bad_labels_too(run_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "rb.csv"
    source.write_text("score,label\n0.2,0\n,1\n0.3,0\n1.5,1\n0.4,x\n0.5,1\n")
    done = run_calib(
        ["recalibrate", str(source), "--negative-rate", "0.5", "-o", "-", "--on-invalid", "drop"]
    )
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(done.stdout)["score"].to_list() == [0.2, 0.3, 0.5]
    assert "dropped 3 invalid rows of 6" in done.stderr.decode()


def test_separable_data_is_reported_and_too_many_folds_refused(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    source = tmp_path / "sep.csv"
    source.write_text("score,label\n0.1,0\n0.2,0\n0.8,1\n0.9,1\n0.15,0\n0.85,1\n")
    model = tmp_path / "m.json"
    done = run_calib(
        ["recalibrate", "--fit", str(source), "--method", "platt", "--save-model", str(model)]
    )
    assert done.returncode == 0, done.stderr
    assert "separate the classes perfectly" in done.stderr.decode()
    assert json.loads(model.read_text())["params"]["separable"] is True
    folds = run_calib(["recalibrate", str(source), "--cross-fit", "50", "-o", "-"])
    assert folds.returncode == 2
    assert "--cross-fit 50 asks for more folds" in folds.stderr.decode()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("n_iter", "abc", "params.n_iter must be an integer"),
        ("converged", "no", "params.converged must be true or false"),
    ],
)
def test_fit_diagnostics_in_artifacts_are_validated(
    run_calib: RunCalib,
    overconfident: dict[str, Path],
    tmp_path: Path,
    field: str,
    value: object,
    message: str,
) -> None:
    model = tmp_path / "p.json"
    assert (
        run_calib(
            [
                "recalibrate",
                "--fit",
                str(overconfident["fit"]),
                "--method",
                "platt",
                "--save-model",
                str(model),
                "-q",
            ]
        ).returncode
        == 0
    )
    document = json.loads(model.read_text())
    document["params"][field] = value
    model.write_text(json.dumps(document))
    done = run_calib(["recalibrate", str(overconfident["apply"]), "--model", str(model), "-o", "-"])
    assert done.returncode == 65
    assert message in done.stderr.decode()


def test_positive_rate_alone_is_refused(
    run_calib: RunCalib, overconfident: dict[str, Path]
) -> None:
    done = run_calib(
        [
            "recalibrate",
            str(overconfident["apply"]),
            "--fit",
            str(overconfident["fit"]),
            "--method",
            "platt",
            "--positive-rate",
            "0.5",
            "-o",
            "-",
        ]
    )
    assert done.returncode == 2
    assert b"--positive-rate goes with --negative-rate" in done.stderr
