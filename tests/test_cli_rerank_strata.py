"""`calib rerank-strata` end to end through the installed command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.stats import rankdata

from tests.conftest import SAMPLE_DATA, RunCalib

REFERENCE = SAMPLE_DATA / "strata_reference.csv"
TARGET = SAMPLE_DATA / "strata_target.csv"


def test_reranking_beats_pooled_scores_and_keeps_order_within_strata(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    out, report = tmp_path / "out.parquet", tmp_path / "r.json"
    done = run_calib(
        [
            "rerank-strata",
            "--reference",
            str(REFERENCE),
            "--target",
            str(TARGET),
            "--strata-col",
            "stratum",
            "-o",
            str(out),
            "--report",
            str(report),
        ]
    )
    assert done.returncode == 0, done.stderr
    frame = pl.read_parquet(out)
    assert frame.columns == [
        *pl.read_csv(TARGET).columns,
        "rerank_score",
        "calibrated",
        "rerank_rank",
    ]
    for _, group in frame.group_by("stratum"):
        raw = rankdata(group["score"].to_numpy(), method="min")
        reranked = rankdata(group["rerank_score"].to_numpy(), method="min")
        np.testing.assert_array_equal(raw, reranked)
    r = frame["rerank_score"].to_numpy()
    np.testing.assert_allclose(frame["calibrated"].to_numpy(), r / (1 + r), rtol=1e-15)
    assert sorted(frame["rerank_rank"].to_list())[0] == 1
    figures = json.loads(report.read_text())
    assert figures["comparison"]["auc_reranked"] > figures["comparison"]["auc_raw"] + 0.05
    assert [s["stratum"] for s in figures["strata"]] == ["A", "B", "C"]
    assert "Ranking on the labelled target" in done.stderr.decode()


def test_one_stratum_keeps_the_raw_ranking(run_calib: RunCalib, tmp_path: Path) -> None:
    reference = pl.read_csv(REFERENCE).with_columns(pl.lit("all").alias("stratum"))
    target = pl.read_csv(TARGET).with_columns(pl.lit("all").alias("stratum"))
    reference.write_csv(tmp_path / "ref.csv")
    target.write_csv(tmp_path / "tgt.csv")
    out = tmp_path / "out.csv"
    done = run_calib(
        [
            "rerank-strata",
            "--reference",
            str(tmp_path / "ref.csv"),
            "--target",
            str(tmp_path / "tgt.csv"),
            "--strata-col",
            "stratum",
            "-o",
            str(out),
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr
    frame = pl.read_csv(out)
    expected = rankdata(-frame["score"].to_numpy(), method="min")
    np.testing.assert_array_equal(frame["rerank_rank"].to_numpy(), expected)


def test_missing_target_stratum_is_a_clear_error(run_calib: RunCalib, tmp_path: Path) -> None:
    target = (
        pl.read_csv(TARGET).head(5).with_columns(pl.Series("stratum", ["A", "Z", "Z", "B", "A"]))
    )
    target.write_csv(tmp_path / "tgt.csv")
    out = tmp_path / "out.csv"
    done = run_calib(
        [
            "rerank-strata",
            "--reference",
            str(REFERENCE),
            "--target",
            str(tmp_path / "tgt.csv"),
            "--strata-col",
            "stratum",
            "-o",
            str(out),
        ]
    )
    assert done.returncode == 65
    assert "stratum 'Z' of the target has no rows in the reference (2 target rows)" in (
        done.stderr.decode()
    )
    assert not out.exists()


def test_prevalence_file_sets_the_odds(run_calib: RunCalib, tmp_path: Path) -> None:
    prevalence = tmp_path / "p.csv"
    prevalence.write_text("stratum,prevalence\nA,0.01\nB,0.05\nC,0.2\n")
    report = tmp_path / "r.json"
    done = run_calib(
        [
            "rerank-strata",
            "--reference",
            str(REFERENCE),
            "--target",
            str(TARGET),
            "--strata-col",
            "stratum",
            "--prevalence-file",
            str(prevalence),
            "-o",
            str(tmp_path / "o.csv"),
            "--report",
            str(report),
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr
    odds = {s["stratum"]: s["stratum_odds"] for s in json.loads(report.read_text())["strata"]}
    assert odds == pytest.approx({"A": 0.01 / 0.99, "B": 0.05 / 0.95, "C": 0.25}, rel=1e-12)


def test_strata_from_the_first_principal_component(run_calib: RunCalib, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    frames = []
    for n in (3000, 2000):
        x1 = rng.normal(size=n)
        x2 = 0.8 * x1 + 0.2 * rng.normal(size=n)
        score = 1 / (1 + np.exp(-(x1 + rng.normal(size=n))))
        label = (rng.random(n) < 1 / (1 + np.exp(-(-3 + 1.5 * x1)))).astype(int)
        frames.append(pl.DataFrame({"x1": x1, "x2": x2, "score": score, "label": label}))
    frames[0].write_csv(tmp_path / "ref.csv")
    frames[1].write_csv(tmp_path / "tgt.csv")
    report, out = tmp_path / "r.json", tmp_path / "o.csv"
    done = run_calib(
        [
            "rerank-strata",
            "--reference",
            str(tmp_path / "ref.csv"),
            "--target",
            str(tmp_path / "tgt.csv"),
            "--pca-features",
            "x1,x2",
            "--n-strata",
            "3",
            "-o",
            str(out),
            "--report",
            str(report),
        ]
    )
    assert done.returncode == 0, done.stderr
    pca = json.loads(report.read_text())["pca"]
    assert pca["explained_variance_ratio"] > 0.9
    assert pca["n_strata"] == 3
    rates = list(pca["reference_label_rate"].values())
    assert rates == sorted(rates)  # the component follows x1, which drives the labels
    assert set(pl.read_csv(out)["pca_stratum"].unique()) == {"pc1", "pc2", "pc3"}
    assert "explains" in done.stderr.decode()


def test_usage_errors(run_calib: RunCalib) -> None:
    both = run_calib(
        [
            "rerank-strata",
            "--reference",
            str(REFERENCE),
            "--target",
            str(TARGET),
            "--strata-col",
            "stratum",
            "--pca-features",
            "x",
            "-o",
            "-",
        ]
    )
    assert both.returncode == 2
    neither = run_calib(
        ["rerank-strata", "--reference", str(REFERENCE), "--target", str(TARGET), "-o", "-"]
    )
    assert neither.returncode == 2


def test_estimated_target_prevalence_sets_the_odds(run_calib: RunCalib, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    done = run_calib(
        [
            "rerank-strata",
            "--reference",
            str(REFERENCE),
            "--target",
            str(TARGET),
            "--strata-col",
            "stratum",
            "--estimate-target-prevalence",
            "-o",
            str(tmp_path / "o.csv"),
            "--report",
            str(report),
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(report.read_text())
    assert figures["odds_source"] == "estimated on the target"
    truth = dict(pl.read_csv(TARGET).group_by("stratum").agg(pl.col("label").mean()).iter_rows())
    odds = {s["stratum"]: s["stratum_odds"] for s in figures["strata"]}
    for stratum, estimate in figures["target_prevalence"].items():
        assert estimate["ci_low"] <= truth[stratum] <= estimate["ci_high"]
        p = estimate["prevalence"]
        assert odds[stratum] == pytest.approx(p / (1 - p), rel=1e-12)


def test_a_stratum_estimated_at_zero_still_ranks(run_calib: RunCalib, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rows = []
    for stratum, n, rate in (("a", 4000, 0.3), ("b", 4000, 0.3)):
        y = rng.random(n) < rate
        rows.append(
            pl.DataFrame(
                {
                    "st": [stratum] * n,
                    "label": y.astype(int),
                    "score": np.where(y, rng.beta(5, 2, n), rng.beta(2, 5, n)),
                }
            )
        )
    pl.concat(rows).write_csv(tmp_path / "ref.csv")
    target = pl.DataFrame(
        {
            "st": ["a"] * 3000 + ["b"] * 3000,
            "score": np.r_[rng.beta(2, 5, 3000), rng.beta(3, 3, 3000)],
        }
    )
    target.write_csv(tmp_path / "tgt.csv")
    done = run_calib(
        [
            "rerank-strata",
            "--reference",
            str(tmp_path / "ref.csv"),
            "--target",
            str(tmp_path / "tgt.csv"),
            "--strata-col",
            "st",
            "--estimate-target-prevalence",
            "-o",
            str(tmp_path / "o.csv"),
        ]
    )
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(tmp_path / "o.csv")["rerank_score"].is_finite().all()


def test_streaming_engine_matches_memory_end_to_end(run_calib: RunCalib, tmp_path: Path) -> None:
    # scores of 3 decimals: every grid cell holds one score, so the outputs are equal
    reference, target = tmp_path / "ref.csv", tmp_path / "target.csv"
    for source, copy in ((REFERENCE, reference), (TARGET, target)):
        pl.read_csv(source).with_columns(pl.col("score").round(3)).write_csv(copy)
    outputs = {}
    for engine in ("memory", "streaming"):
        out, report = tmp_path / f"{engine}.csv", tmp_path / f"{engine}.json"
        done = run_calib(
            [
                "rerank-strata",
                "--reference",
                str(reference),
                "--target",
                str(target),
                "--strata-col",
                "stratum",
                "--engine",
                engine,
                "-o",
                str(out),
                "--report",
                str(report),
            ]
        )
        assert done.returncode == 0, done.stderr
        outputs[engine] = (out.read_bytes(), json.loads(report.read_text()))
    memory, streaming = outputs["memory"], outputs["streaming"]
    assert memory[0] == streaming[0]
    assert memory[1]["strata"] == streaming[1]["strata"]
    note = streaming[1]["streaming"]
    assert note["engine"] == "streaming" and note["exact_cells"] == note["reference_cells"]
    for key in ("auc_raw", "auc_reranked"):
        bound = note[f"{key}_bound"]
        assert abs(memory[1]["comparison"][key] - streaming[1]["comparison"][key]) <= bound


def test_streaming_engine_refusals(run_calib: RunCalib, tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    bad = tmp_path / "bad.csv"
    pl.read_csv(TARGET).with_columns(pl.lit("Z").alias("stratum")).write_csv(bad)
    base = ["rerank-strata", "--reference", str(REFERENCE), "--engine", "streaming", "-o", str(out)]
    done = run_calib([*base, "--target", str(bad), "--strata-col", "stratum"])
    assert done.returncode == 65
    assert (
        "bad.csv: stratum 'Z' of the target has no rows in the reference (20000 target rows)"
        in (done.stderr.decode())
    )
    assert not out.exists()
    pca = run_calib([*base, "--target", str(TARGET), "--pca-features", "x"])
    assert pca.returncode == 2
    assert "--engine streaming does not support --pca-features" in pca.stderr.decode()
