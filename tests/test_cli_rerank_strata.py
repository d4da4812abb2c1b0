"""`calib rerank-strata` end to end through the installed command.

Each run here checks the command-line contract (diagnostics and warnings on stderr, exit
codes, exact error lines) and that the options reach the workflow: its report and rows
equal those of :func:`run_rerank_strata` called in-process with the same options. Figures
that need no command line (one stratum, a prevalence file, a stratum estimated at zero, the
two engines alike on the sample, the refusals' messages) are checked in-process in
tests/test_workflows_rerank_strata.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.stats import rankdata

from calib_cli.report.payloads import dumps, rerank_strata_payload
from calib_cli.types import JsonValue
from calib_cli.workflows.rerank_strata import (
    RerankStrataRequest,
    RerankStrataResult,
    run_rerank_strata,
)
from tests.conftest import SAMPLE_DATA, RunCalib

REFERENCE = SAMPLE_DATA / "strata_reference.csv"
TARGET = SAMPLE_DATA / "strata_target.csv"


def _json(result: RerankStrataResult) -> JsonValue:
    """The report as the command writes it (``--report``)."""
    parsed: JsonValue = json.loads(dumps(rerank_strata_payload(result)))
    return parsed


@pytest.mark.slow  # an experiment on 100,000 rows: make test-slow (CI) runs it
def test_reranking_by_estimated_odds_beats_pooled_scores_and_keeps_order_within_strata(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    """The memory engine with --estimate-target-prevalence: the report is the workflow's,
    each of its warnings a `warning:` line and the tables on stderr; the estimated rates
    cover the target's true rates and set the odds."""
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
            "--estimate-target-prevalence",
            "-o",
            str(out),
            "--report",
            str(report),
        ]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    warnings: list[str] = []
    in_process = run_rerank_strata(
        RerankStrataRequest(
            reference=str(REFERENCE),
            target=str(TARGET),
            strata_col="stratum",
            estimate_target_prevalence=True,
            output=str(tmp_path / "in_process.parquet"),
        ),
        warn=warnings.append,
    )
    figures = json.loads(report.read_text())
    assert figures == _json(in_process)
    stderr = done.stderr.decode()
    assert "Ranking on the labelled target" in stderr
    assert warnings
    for warning in warnings:
        assert f"warning: {warning}" in " ".join(stderr.split())  # Rich wraps at 160 columns
    frame = pl.read_parquet(out)
    assert frame.equals(pl.read_parquet(tmp_path / "in_process.parquet"))
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
    assert figures["comparison"]["auc_reranked"] > figures["comparison"]["auc_raw"] + 0.05
    assert [s["stratum"] for s in figures["strata"]] == ["A", "B", "C"]
    assert figures["odds_source"] == "estimated on the target"
    truth = dict(pl.read_csv(TARGET).group_by("stratum").agg(pl.col("label").mean()).iter_rows())
    odds = {s["stratum"]: s["stratum_odds"] for s in figures["strata"]}
    for stratum, estimate in figures["target_prevalence"].items():
        assert estimate["ci_low"] <= truth[stratum] <= estimate["ci_high"]
        p = estimate["prevalence"]
        assert odds[stratum] == pytest.approx(p / (1 - p), rel=1e-12)


def test_streaming_engine_with_a_prevalence_file_matches_memory_end_to_end(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    """--engine streaming and --prevalence-file reach the workflow: the rows equal the
    in-memory engine's (in-process), the odds are the file's, the AUCs within the stated
    bounds."""
    # scores of 3 decimals: every grid cell holds one score, so the outputs are equal
    reference, target = tmp_path / "ref.csv", tmp_path / "target.csv"
    for source, copy in ((REFERENCE, reference), (TARGET, target)):
        pl.read_csv(source).with_columns(pl.col("score").round(3)).write_csv(copy)
    prevalence = tmp_path / "p.csv"
    prevalence.write_text("stratum,prevalence\nA,0.01\nB,0.05\nC,0.2\n")
    out, report = tmp_path / "streaming.csv", tmp_path / "streaming.json"
    done = run_calib(
        [
            "rerank-strata",
            "--reference",
            str(reference),
            "--target",
            str(target),
            "--strata-col",
            "stratum",
            "--prevalence-file",
            str(prevalence),
            "--engine",
            "streaming",
            "-o",
            str(out),
            "--report",
            str(report),
        ]
    )
    assert done.returncode == 0, done.stderr
    assert "streaming engine: reference ROC at" in done.stderr.decode()
    memory_out = tmp_path / "memory.csv"
    memory = _json(
        run_rerank_strata(
            RerankStrataRequest(
                reference=str(reference),
                target=str(target),
                strata_col="stratum",
                prevalence_file=str(prevalence),
                engine="memory",
                output=str(memory_out),
            )
        )
    )
    assert isinstance(memory, dict)
    streaming = json.loads(report.read_text())
    assert memory_out.read_bytes() == out.read_bytes()
    assert memory["strata"] == streaming["strata"]
    assert streaming["odds_source"] == "prevalence file"
    odds = {s["stratum"]: s["stratum_odds"] for s in streaming["strata"]}
    assert odds == pytest.approx({"A": 0.01 / 0.99, "B": 0.05 / 0.95, "C": 0.25}, rel=1e-12)
    note = streaming["streaming"]
    assert note["engine"] == "streaming" and note["exact_cells"] == note["reference_cells"]
    comparison = memory["comparison"]
    assert isinstance(comparison, dict)
    for key in ("auc_raw", "auc_reranked"):
        bound = note[f"{key}_bound"]
        assert abs(comparison[key] - streaming["comparison"][key]) <= bound


def test_strata_from_the_first_principal_component(invoke_calib: RunCalib, tmp_path: Path) -> None:
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
    done = invoke_calib(
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
    figures = json.loads(report.read_text())
    in_process_out = tmp_path / "in_process.csv"
    assert figures == _json(
        run_rerank_strata(
            RerankStrataRequest(
                reference=str(tmp_path / "ref.csv"),
                target=str(tmp_path / "tgt.csv"),
                pca_features="x1,x2",
                n_strata=3,
                output=str(in_process_out),
            )
        )
    )
    assert out.read_bytes() == in_process_out.read_bytes()
    pca = figures["pca"]
    assert pca["explained_variance_ratio"] > 0.9
    assert pca["n_strata"] == 3
    rates = list(pca["reference_label_rate"].values())
    assert rates == sorted(rates)  # the component follows x1, which drives the labels
    assert set(pl.read_csv(out)["pca_stratum"].unique()) == {"pc1", "pc2", "pc3"}
    assert "explains" in done.stderr.decode()
    # the option repeated is the comma-separated list (it kept only the last one before)
    repeated = tmp_path / "repeated.csv"
    args = ["rerank-strata", "--reference", str(tmp_path / "ref.csv")]
    args += ["--target", str(tmp_path / "tgt.csv"), "--n-strata", "3", "-o", str(repeated)]
    again = invoke_calib([*args, "--pca-features", "x1", "--pca-features", "x2"])
    assert again.returncode == 0, again.stderr
    assert repeated.read_bytes() == out.read_bytes()


def test_refusals_are_one_error_line_exit_65_or_2_and_write_nothing(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """A target stratum missing from the reference is bad input (65), the streaming engine
    with --pca-features a usage error (2). The other refusals, and the memory engine's line,
    are raised in-process (tests/test_workflows_rerank_strata.py)."""
    out = tmp_path / "out.parquet"
    bad = tmp_path / "bad.csv"
    pl.read_csv(TARGET).with_columns(pl.lit("Z").alias("stratum")).write_csv(bad)
    base = ["rerank-strata", "--reference", str(REFERENCE), "--engine", "streaming", "-o", str(out)]
    done = invoke_calib([*base, "--target", str(bad), "--strata-col", "stratum"])
    assert (done.returncode, done.stdout) == (65, b"")
    assert done.stderr.decode() == (
        f"error: {bad}: stratum 'Z' of the target has no rows in the reference {REFERENCE} "
        "(20000 target rows)\n"
    )
    assert not out.exists()
    pca = invoke_calib([*base, "--target", str(TARGET), "--pca-features", "x"])
    assert (pca.returncode, pca.stdout) == (2, b"")
    assert pca.stderr.decode() == (
        "error: --engine streaming does not support --pca-features yet; use --engine memory\n"
    )
    assert not out.exists()
