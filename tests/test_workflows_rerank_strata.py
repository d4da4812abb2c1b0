"""The rerank-strata workflow in-process: strata, odds, comparison and the output columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli.errors import UsageError
from calib_cli.report.payloads import rerank_strata_payload
from calib_cli.workflows.rerank_strata import RerankStrataRequest, run_rerank_strata


def _rows(n: int, rng: np.random.Generator) -> pl.DataFrame:
    """Two strata with different base rates, each scored by its own model."""
    stratum = rng.choice(["a", "b"], n)
    rate = np.where(stratum == "a", 0.05, 0.3)
    label = (rng.random(n) < rate).astype(np.int64)
    score = np.clip(rng.beta(2, 5, n) + 0.3 * label, 0.001, 0.999)
    return pl.DataFrame(
        {"stratum": stratum, "x": rng.normal(size=n), "score": score, "label": label}
    )


def _files(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(3)
    reference, target = tmp_path / "ref.csv", tmp_path / "target.csv"
    _rows(3000, rng).write_csv(reference)
    _rows(1000, rng).write_csv(target)
    return reference, target


def test_strata_from_a_column_with_reference_odds(tmp_path: Path) -> None:
    reference, target = _files(tmp_path)
    out = tmp_path / "out.csv"
    result = run_rerank_strata(
        RerankStrataRequest(
            reference=str(reference), target=str(target), strata_col="stratum", output=str(out)
        )
    )
    assert result.odds_source == "reference" and result.pca is None
    assert [s.stratum for s in result.strata] == ["a", "b"]
    assert result.strata[1].stratum_odds > result.strata[0].stratum_odds
    assert result.comparison is not None
    assert result.comparison.auc_reranked >= result.comparison.auc_raw - 0.01
    frame = pl.read_csv(out)
    assert frame.columns[-3:] == ["rerank_score", "calibrated", "rerank_rank"]
    assert sorted(frame["rerank_rank"].to_list()) == list(range(1, frame.height + 1))
    payload = rerank_strata_payload(result)
    assert list(payload) == ["seed", "smoothing", "odds_source", "strata", "comparison"]


def test_pca_strata_add_their_column_and_report(tmp_path: Path) -> None:
    reference, target = _files(tmp_path)
    out = tmp_path / "out.csv"
    result = run_rerank_strata(
        RerankStrataRequest(
            reference=str(reference),
            target=str(target),
            pca_features="x,score",
            n_strata=2,
            output=str(out),
        )
    )
    assert result.pca is not None and result.pca.n_strata == 2
    assert "pca_stratum" in pl.read_csv(out).columns
    payload = rerank_strata_payload(result)
    pca = payload["pca"]
    assert isinstance(pca, dict) and "reference_strata" not in pca and "loadings" in pca


def test_one_source_of_strata(tmp_path: Path) -> None:
    reference, target = _files(tmp_path)
    with pytest.raises(UsageError, match="one of them"):
        run_rerank_strata(
            RerankStrataRequest(
                reference=str(reference),
                target=str(target),
                strata_col="stratum",
                pca_features="x",
                output=str(tmp_path / "o.csv"),
            )
        )
