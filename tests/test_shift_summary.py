"""estimate-shift from summaries: the fine counts built from summary keys, and the estimates.

References: :func:`calib_cli.core.shift.count_reference` and
:func:`~calib_cli.core.shift.count_target` on the same rows (equal when no key straddles a fine
edge: scores with two decimals, every cell one score), and ``estimate-shift`` on the rows
(point estimates within 5% of a standard error, measured 1%; the counts' bound is the weight
of the straddling keys). Summaries from ``calib summarize`` in-process and from the query of
``summarize --emit-sql --dialect duckdb`` run in DuckDB.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_cli.core.shift import count_reference, count_target, fit_reference, grid_range
from calib_cli.core.shift_cells import reference_counts_from_keys, target_counts_from_keys
from calib_cli.errors import InputError, UsageError
from calib_cli.report.payloads import estimate_shift_payload
from calib_cli.sql.summary import SummaryQuery, summary_sql
from calib_cli.summaries import summarize_arrays
from calib_cli.workflows.estimate_shift import (
    EstimateShiftRequest,
    run_estimate_shift,
    summary_keys,
)
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize


def _draw(n: int, alpha: float, rng: np.random.Generator, *, decimals: int | None = None) -> Any:
    labels = (rng.random(n) < alpha).astype(np.int64)
    scores = np.where(labels == 1, rng.beta(5.0, 2.0, n), rng.beta(2.0, 5.0, n))
    if decimals is not None:
        scores = np.clip(np.round(scores, decimals), 0.01, 0.99)
    return scores, labels


# ------------------------------------------------------------------------------ the counts


def test_keys_of_single_scores_give_the_counts_of_the_rows() -> None:
    """Two decimals: every key is one distinct score, so nothing straddles a fine edge and the
    reference's and a batch's counts are those of the rows (to float summation)."""
    rng = np.random.default_rng(1)
    scores, labels = _draw(3000, 0.3, rng, decimals=2)
    weights = rng.choice([0.0, 0.5, 1.0, 2.0], scores.size)
    summary = summarize_arrays(labels, scores, sample_weight=weights)
    counts, binning = reference_counts_from_keys(summary_keys(summary))
    used = weights > 0.0
    low, high = grid_range([(float(np.log(0.01 / 0.99)), float(np.log(0.99 / 0.01)))])
    assert (counts.logit_low, counts.logit_high) == pytest.approx((low, high), rel=1e-15)
    rows = count_reference(scores, labels.astype(float), sample_weight=weights,
                           score_kind="probability", logit_low=counts.logit_low,
                           logit_high=counts.logit_high, n_fine=2048)  # fmt: skip
    assert binning.straddling_keys == 0
    for name in ("rows_neg", "rows_pos", "weight_neg", "weight_pos", "distinct_neg",
                 "distinct_pos", "distinct_logit"):  # fmt: skip
        np.testing.assert_allclose(getattr(counts, name), getattr(rows, name), rtol=1e-12,
                                   err_msg=name)  # fmt: skip
    np.testing.assert_allclose(counts.logit_sum, rows.logit_sum, rtol=1e-12, atol=1e-9)
    assert counts.square_neg == pytest.approx(rows.square_neg, rel=1e-12)
    assert counts.square_pos == pytest.approx(rows.square_pos, rel=1e-12)
    assert float(counts.rows_neg.sum() + counts.rows_pos.sum()) == np.sum(used)
    model = fit_reference(scores, labels, sample_weight=weights)
    batch_scores, _ = _draw(800, 0.1, rng, decimals=2)
    target, fell = target_counts_from_keys(
        model, summary_keys(summarize_arrays(np.zeros(800), batch_scores))
    )
    (expected,) = count_target(model, batch_scores)
    assert fell.straddling_keys == 0
    for name in ("rows", "weight"):
        np.testing.assert_allclose(getattr(target, name), getattr(expected, name), rtol=1e-12)
    np.testing.assert_allclose(target.logit_sum, expected.logit_sum, rtol=1e-12, atol=1e-9)
    assert (target.size, target.weight_square) == (expected.size, expected.weight_square)
    assert target.outside_weight == expected.outside_weight


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(20, 400),
    bits=st.sampled_from([4, 8, 12]),
)
def test_only_straddling_keys_move_rows_and_never_further_than_their_span(
    seed: int, n: int, bits: int
) -> None:
    """Every class's rows and weight are conserved; a fine cell's rows differ from the rows'
    count only by rows of keys that straddle an edge (at most twice their rows in total)."""
    rng = np.random.default_rng(seed)
    scores, labels = _draw(n, 0.4, rng)
    labels[:2] = [0, 1]
    weights = rng.choice([0.0, 1.0, 3.0], n)
    weights[:2] = 1.0
    summary = summarize_arrays(labels, scores, sample_weight=weights, mantissa_bits=bits)
    keys = summary_keys(summary)
    counts, binning = reference_counts_from_keys(keys, n_fine=64)
    rows = count_reference(scores, labels.astype(float), sample_weight=weights,
                           score_kind="probability", logit_low=counts.logit_low,
                           logit_high=counts.logit_high, n_fine=64)  # fmt: skip
    for name in ("rows_neg", "rows_pos", "weight_neg", "weight_pos"):
        assert float(getattr(counts, name).sum()) == pytest.approx(
            float(getattr(rows, name).sum()), rel=1e-12
        )
    moved = float(np.abs(counts.rows_neg - rows.rows_neg).sum())
    moved += float(np.abs(counts.rows_pos - rows.rows_pos).sum())
    from scipy.special import logit

    live = keys.weight > 0.0
    u_low = logit(np.clip(keys.score_min[live], 1e-12, 1 - 1e-12))
    u_high = logit(np.clip(keys.score_max[live], 1e-12, 1 - 1e-12))
    width = (counts.logit_high - counts.logit_low) / 64
    edge_low = np.floor((u_low - counts.logit_low) / width)
    edge_high = np.floor((u_high - counts.logit_low) / width)
    straddling_rows = float(
        np.sum(keys.rows[live][np.minimum(edge_low, 63) != np.minimum(edge_high, 63)])
    )
    assert moved <= 2.0 * straddling_rows + 1e-9
    if binning.straddling_keys == 0:
        assert moved == 0.0


# ------------------------------------------------------------------------- the estimates


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("shift")
    rng = np.random.default_rng(0)
    scores, labels = _draw(20_000, 0.3, rng)
    pl.DataFrame({"score": scores, "label": labels}).write_parquet(tmp / "ref.parquet")
    days = []
    for day, alpha in enumerate((0.05, 0.2, 0.5)):
        s, y = _draw(4000, alpha, rng)
        days.append(pl.DataFrame({"score": s, "label": y, "day": np.full(4000, day)}))
    pl.concat(days).write_parquet(tmp / "tgt.parquet")
    run_summarize(
        SummarizeRequest(files=(str(tmp / "ref.parquet"),), output=str(tmp / "ref.s.parquet"))
    )
    run_summarize(
        SummarizeRequest(
            files=(str(tmp / "tgt.parquet"),), output=str(tmp / "tgt.s.parquet"), by="day"
        )
    )
    return {"ref": tmp / "ref.parquet", "tgt": tmp / "tgt.parquet",
            "ref_s": tmp / "ref.s.parquet", "tgt_s": tmp / "tgt.s.parquet", "dir": tmp}  # fmt: skip


def _run(**options: Any) -> Any:
    options.setdefault("n_bootstrap", 0)
    return run_estimate_shift(EstimateShiftRequest(batch_col="day", **options))


@pytest.mark.parametrize("method", ["mle", "em", "pacc", "map"])
def test_summaries_give_the_estimates_of_the_rows(files: dict[str, Path], method: str) -> None:
    rows = _run(reference=str(files["ref"]), target=str(files["tgt"]), method=method,
                ci_method="profile" if method == "mle" else "bootstrap")  # fmt: skip
    summ = _run(reference_summaries=(str(files["ref_s"]),), target_summaries=(str(files["tgt_s"]),),
                method=method, ci_method="profile" if method == "mle" else "bootstrap")  # fmt: skip
    assert [b.batch for b in summ.batches] == [b.batch for b in rows.batches] == [0, 1, 2]
    for a, b in zip(rows.batches, summ.batches, strict=True):
        se = np.sqrt(a.true_prevalence * (1 - a.true_prevalence) / 4000)
        assert abs(b.estimate.prevalence - a.estimate.prevalence) <= 0.05 * se
        assert b.true_prevalence == a.true_prevalence
        assert b.estimate.n == a.estimate.n == 4000
        assert b.estimate.reference_auc == pytest.approx(a.estimate.reference_auc, abs=1e-4)
        assert b.estimate.reference_prevalence == pytest.approx(
            a.estimate.reference_prevalence, rel=1e-12
        )
        if method == "mle":  # the profile interval: deterministic, as close as the estimate
            assert b.estimate.ci_low == pytest.approx(a.estimate.ci_low, abs=0.05 * se)
            assert b.estimate.ci_high == pytest.approx(a.estimate.ci_high, abs=0.05 * se)
    binning = summ.binning
    assert binning is not None and binning.reference is not None
    assert 0.0 < binning.reference.straddling_share < 0.02
    assert len(binning.batches) == 3


def test_a_summary_on_one_side_and_rows_on_the_other(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """Reference summary with target rows (and -o, the rows' pass) and reference rows with a
    target summary: each the estimate of the side it shares, within the counts' bound."""
    both = _run(reference_summaries=(str(files["ref_s"]),), target_summaries=(str(files["tgt_s"]),))
    rows = _run(reference=str(files["ref"]), target=str(files["tgt"]))
    out = tmp_path / "out.parquet"
    ref_summary = _run(reference_summaries=(str(files["ref_s"]),), target=str(files["tgt"]),
                       output=str(out))  # fmt: skip
    tgt_summary = _run(reference=str(files["ref"]), target_summaries=(str(files["tgt_s"]),))
    for mixed in (ref_summary, tgt_summary):
        for a, b in zip(rows.batches, mixed.batches, strict=True):
            assert abs(a.estimate.prevalence - b.estimate.prevalence) <= 2e-4
    assert ref_summary.binning.batches == ()
    assert tgt_summary.binning.reference is None
    assert pl.read_parquet(out).columns == ["score", "label", "day", "calibrated"]
    assert both.batches[0].estimate.prevalence == pytest.approx(
        tgt_summary.batches[0].estimate.prevalence, abs=2e-4
    )


def test_a_duckdb_summary_of_the_target_gives_the_same_estimates(files: dict[str, Path]) -> None:
    path = files["dir"] / "engine.parquet"
    query = SummaryQuery(table=f"read_parquet('{files['tgt']}')", by="day")
    duckdb.connect().execute(
        f"COPY ({summary_sql(query, dialect_name='duckdb')}) TO '{path}' (FORMAT parquet)"
    )
    ours = _run(reference_summaries=(str(files["ref_s"]),), target_summaries=(str(files["tgt_s"]),))
    engine = _run(reference_summaries=(str(files["ref_s"]),), target_summaries=(str(path),))
    for a, b in zip(ours.batches, engine.batches, strict=True):
        assert b.batch == a.batch
        assert b.estimate.prevalence == pytest.approx(a.estimate.prevalence, rel=1e-9, abs=1e-12)


def test_the_report_and_the_decisions_from_a_target_summary(files: dict[str, Path]) -> None:
    rows = _run(reference=str(files["ref"]), target=str(files["tgt"]), costs="1:4", n_bootstrap=20)
    summ = _run(reference_summaries=(str(files["ref_s"]),), target_summaries=(str(files["tgt_s"]),),
                costs="1:4", n_bootstrap=20)  # fmt: skip
    payload = estimate_shift_payload(summ)
    assert payload["batch_col"] == "day"
    assert [b["batch"] for b in payload["batches"]] == [0, 1, 2]
    binning = payload["summary_binning"]
    assert binning["reference"]["keys"] == summ.binning.reference.keys  # type: ignore[union-attr]
    assert len(binning["batches"]) == 3
    assert all(0.0 <= b["straddling_share"] < 0.02 for b in binning["batches"])
    assert "summary_binning" not in estimate_shift_payload(rows)
    assert summ.decision_threshold == rows.decision_threshold == 0.2
    for a, b in zip(rows.batches, summ.batches, strict=True):
        # each cell's rows on one side of the threshold: the shares move by the weight of the
        # cell that holds the threshold's score, here under 1e-3
        assert b.decision.flagged_static == pytest.approx(a.decision.flagged_static, abs=1e-3)
        assert b.decision.flagged_shifted == pytest.approx(a.decision.flagged_shifted, abs=1e-3)
        assert b.decision.realised_cost_static == pytest.approx(
            a.decision.realised_cost_static, abs=1e-3
        )


def test_an_unlabelled_target_summary_reports_no_truth(files: dict[str, Path]) -> None:
    """A batch summarised with a constant label 0 (summaries always carry a label)."""
    path = files["dir"] / "unlabelled.parquet"
    frame = pl.read_parquet(files["tgt"]).with_columns(label=pl.lit(0))
    frame.write_parquet(files["dir"] / "unlabelled_rows.parquet")
    run_summarize(SummarizeRequest(files=(str(files["dir"] / "unlabelled_rows.parquet"),),
                                   output=str(path), by="day"))  # fmt: skip
    result = _run(reference_summaries=(str(files["ref_s"]),), target_summaries=(str(path),))
    assert all(b.true_prevalence is None and b.error is None for b in result.batches)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"reference": "r.csv", "reference_summaries": ("r.parquet",), "target": "t.csv"},
         UsageError, "give --reference FILE or --reference-summary S, not both"),
        ({"reference_summaries": ("r.parquet",)}, UsageError,
         r"give --target FILE \(or --target-summary S\)"),
        ({"target_summaries": ("t",), "output": "o.csv"}, UsageError, "drop -o"),
        ({"target_summaries": ("t",), "score_kind": "logit"}, UsageError,
         "summaries hold probabilities: --score-kind logit needs rows"),
        ({"target_summaries": ("t",), "history": "h.csv"}, UsageError,
         "--history reads labelled rows"),
    ],
)  # fmt: skip
def test_what_summaries_cannot_do_is_refused(
    files: dict[str, Path], options: dict[str, Any], error: type[Exception], message: str
) -> None:
    options = dict(options)
    options.setdefault("reference_summaries", (str(files["ref_s"]),))
    if options.get("target_summaries") == ("t",):
        options["target_summaries"] = (str(files["tgt_s"]),)
    if "reference" in options:
        options["reference_summaries"] = ("r.parquet",)
    with pytest.raises(error, match=message):
        run_estimate_shift(EstimateShiftRequest(**options))


def test_a_weighted_or_ungrouped_target_summary_is_refused(files: dict[str, Path]) -> None:
    weighted = files["dir"] / "weighted.parquet"
    pl.read_parquet(files["tgt"]).with_columns(w=pl.lit(2.0)).write_parquet(
        files["dir"] / "w.parquet"
    )
    run_summarize(SummarizeRequest(files=(str(files["dir"] / "w.parquet"),), output=str(weighted),
                                   by="day", weight_col="w"))  # fmt: skip
    with pytest.raises(InputError, match="the target summary is weighted"):
        _run(reference_summaries=(str(files["ref_s"]),), target_summaries=(str(weighted),))
    with pytest.raises(InputError, match="so it cannot give the batches of --batch-col 'week'"):
        run_estimate_shift(EstimateShiftRequest(reference_summaries=(str(files["ref_s"]),),
                                                target_summaries=(str(files["tgt_s"]),),
                                                batch_col="week", n_bootstrap=0))  # fmt: skip
