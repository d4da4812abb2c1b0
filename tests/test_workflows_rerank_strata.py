"""The rerank-strata workflow in-process: strata, odds, comparison and the output columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.stats import rankdata

from calib_cli.errors import InputError, UsageError
from calib_cli.report.payloads import rerank_strata_payload
from calib_cli.workflows.rerank_strata import RerankStrataRequest, run_rerank_strata
from tests.conftest import SAMPLE_DATA


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
    keys = ["seed", "smoothing", "odds_source", "strata", "comparison", "streaming"]
    assert list(payload) == keys
    assert payload["streaming"] is None  # in memory
    assert list(payload["comparison"])[:3] == ["rows", "auc_raw", "auc_reranked"]
    assert payload["comparison"]["rows"] == frame.height == result.comparison_rows


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


# ------------------------------------------------------------------ the streaming engine


def _scored(n: int, rng: np.random.Generator, *, decimals: int | None) -> pl.DataFrame:
    """Three strata with different base rates; an id and a text column to pass through."""
    stratum = rng.choice([3, 1, 20], n)
    rate = np.select([stratum == 3, stratum == 1], [0.05, 0.3], 0.15)
    label = (rng.random(n) < rate).astype(np.int64)
    score = np.clip(rng.beta(2, 5, n) + 0.3 * label, 0.001, 0.999)
    if decimals is not None:
        score = np.round(score, decimals)
    return pl.DataFrame(
        {
            "id": np.arange(n),
            "note": [f"r{i:05d}" for i in range(n)],
            "day": stratum,
            "score": score,
            "label": label,
        }
    )


def _both_engines(
    tmp_path: Path, *, decimals: int | None, suffix: str = ".parquet", **options: object
) -> tuple[pl.DataFrame, pl.DataFrame, object, object]:
    rng = np.random.default_rng(11)
    reference, target = tmp_path / f"ref{suffix}", tmp_path / f"tgt{suffix}"
    for path, n in ((reference, 6000), (target, 9000)):
        frame = _scored(n, rng, decimals=decimals)
        frame.write_parquet(path) if suffix == ".parquet" else frame.write_csv(path)
    results = []
    for engine in ("memory", "streaming"):
        out = tmp_path / f"out_{engine}{suffix}"
        results.append(
            run_rerank_strata(
                RerankStrataRequest(
                    reference=str(reference),
                    target=str(target),
                    strata_col="day",
                    output=str(out),
                    engine=engine,  # type: ignore[arg-type]
                    **options,  # type: ignore[arg-type]
                )
            )
        )
    read = pl.read_parquet if suffix == ".parquet" else pl.read_csv
    return (
        read(tmp_path / f"out_memory{suffix}"),
        read(tmp_path / f"out_streaming{suffix}"),
        results[0],
        results[1],
    )


def test_streaming_equals_memory_when_every_cell_holds_one_score(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # scores with 3 decimals: each grid cell holds one distinct score, so the slopes, odds,
    # rerank scores and ranks are exactly the in-memory engine's (ranks in several chunks)
    monkeypatch.setattr("calib_cli.workflows.rerank_strata.STREAMING_CHUNK_ROWS", 1000)
    memory, streaming, mem, stream = _both_engines(tmp_path, decimals=3)
    assert memory.columns == streaming.columns
    assert memory.equals(streaming)
    assert stream.streaming is not None and mem.streaming is None  # type: ignore[attr-defined]
    note = stream.streaming  # type: ignore[attr-defined]
    assert note.exact_cells == note.reference_cells and note.max_cell_fpr == 0.0
    assert note.stratum_auc_bound == 0.0
    assert mem.strata == stream.strata  # type: ignore[attr-defined]
    a, b = mem.comparison, stream.comparison  # type: ignore[attr-defined]
    assert a.auc_raw == pytest.approx(b.auc_raw, abs=note.auc_raw_bound + 1e-12)
    assert a.auc_reranked == pytest.approx(b.auc_reranked, abs=note.auc_reranked_bound + 1e-12)
    payload = rerank_strata_payload(stream)  # type: ignore[arg-type]
    assert list(payload)[-1] == "streaming" and payload["streaming"] is not None
    # a stable key (DESIGN): there in memory too, null (--engine auto picks by size)
    assert rerank_strata_payload(mem)["streaming"] is None  # type: ignore[arg-type]


def test_streaming_equals_memory_on_continuous_scores_and_bounds_its_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # scores of full precision: cells of several scores. Both engines fit the slopes on the
    # same cells, so the rows are the same (before: the hull fitted on the distinct scores in
    # memory moved calibrated by up to 22% on large files); only the report's AUCs differ,
    # each within its stated bound
    from calib_cli.core.strata import rerank_rank

    monkeypatch.setattr("calib_cli.workflows.rerank_strata.STREAMING_CHUNK_ROWS", 700)
    memory, streaming, mem, stream = _both_engines(tmp_path, decimals=None)
    note = stream.streaming  # type: ignore[attr-defined]
    assert note.exact_cells < note.reference_cells and 0.0 < note.max_cell_fpr < 0.01
    # order, pass-through columns and the added columns: the in-memory engine's
    assert streaming["id"].to_list() == list(range(9000))
    assert memory.equals(streaming)
    # ranks are exact for the rerank scores (the in-memory tie rule)
    expected = rerank_rank(streaming["rerank_score"].to_numpy(), streaming["score"].to_numpy())
    np.testing.assert_array_equal(streaming["rerank_rank"].to_numpy(), expected)
    # the within-stratum AUC of the table (exact in memory), and the comparison, within their
    # stated bounds
    for a, b in zip(mem.strata, stream.strata, strict=True):  # type: ignore[attr-defined]
        assert (a.stratum, a.rows, a.stratum_odds) == (b.stratum, b.rows, b.stratum_odds)
        assert (a.slope_min, a.slope_max) == (b.slope_min, b.slope_max)
        assert abs(a.auc - b.auc) <= note.stratum_auc_bound + 1e-12
    cmp_mem, cmp_stream = mem.comparison, stream.comparison  # type: ignore[attr-defined]
    assert abs(cmp_mem.auc_raw - cmp_stream.auc_raw) <= note.auc_raw_bound + 1e-12
    assert abs(cmp_mem.auc_reranked - cmp_stream.auc_reranked) <= note.auc_reranked_bound + 1e-12


def test_streaming_keeps_text_formats_and_pass_through_text(tmp_path: Path) -> None:
    memory, streaming, _, _ = _both_engines(tmp_path, decimals=3, suffix=".csv")
    assert memory.equals(streaming)
    assert streaming["note"][0] == "r00000"


def test_streaming_refuses_bad_input_before_writing(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    reference, target, out = tmp_path / "ref.csv", tmp_path / "tgt.csv", tmp_path / "out.csv"
    _scored(500, rng, decimals=3).write_csv(reference)
    bad = _scored(300, rng, decimals=3).with_columns(
        pl.when(pl.col("id").is_in([16, 40])).then(1.5).otherwise(pl.col("score")).alias("score")
    )
    bad.write_csv(target)

    def run(ref: Path, tgt: Path, strata_col: str = "day") -> None:
        run_rerank_strata(
            RerankStrataRequest(
                reference=str(ref),
                target=str(tgt),
                strata_col=strata_col,
                output=str(out),
                engine="streaming",
            )
        )

    with pytest.raises(
        InputError,
        match=r"tgt.csv: column 'score' has 2 values outside \[0, 1\] \(first at row 17: 1.5\)",
    ):
        run(reference, target)
    _scored(300, rng, decimals=3).with_columns(pl.lit(7).alias("label")).write_csv(target)
    with pytest.raises(
        InputError,
        match=r"column 'label' has 300 values that are not 0/1 or true/false \(first at row 1: 7\)",
    ):
        run(target, reference)
    _scored(300, rng, decimals=3).with_columns(pl.lit(99).alias("day")).write_csv(target)
    with pytest.raises(InputError, match="stratum '99' of the target has no rows in the reference"):
        run(reference, target)
    with pytest.raises(InputError, match="no column 'segment'"):
        run(reference, reference, strata_col="segment")
    assert not out.exists()
    with pytest.raises(UsageError, match="--engine streaming does not support --pca-features"):
        run_rerank_strata(
            RerankStrataRequest(
                reference=str(reference),
                target=str(reference),
                pca_features="score",
                output=str(out),
                engine="streaming",
            )
        )


def test_streaming_honours_weights_like_memory(tmp_path: Path) -> None:
    # integer weights (0 included) on scores of 3 decimals: the engines agree exactly
    rng = np.random.default_rng(8)
    reference, target = tmp_path / "ref.parquet", tmp_path / "tgt.parquet"
    for path, n in ((reference, 4000), (target, 3000)):
        _scored(n, rng, decimals=3).with_columns(
            pl.Series("w", rng.integers(0, 4, n)).cast(pl.Float64)
        ).write_parquet(path)
    frames, results = [], []
    for engine in ("memory", "streaming"):
        out = tmp_path / f"{engine}.parquet"
        results.append(
            run_rerank_strata(
                RerankStrataRequest(
                    reference=str(reference),
                    target=str(target),
                    strata_col="day",
                    weight_col="w",
                    output=str(out),
                    engine=engine,  # type: ignore[arg-type]
                )
            )
        )
        frames.append(pl.read_parquet(out))
    assert frames[0].equals(frames[1])
    assert results[0].strata == results[1].strata


# ------------------------------------------------- on the sample data (moved from the CLI tests)

SAMPLE_REFERENCE = SAMPLE_DATA / "strata_reference.csv"
SAMPLE_TARGET = SAMPLE_DATA / "strata_target.csv"


def test_reranking_by_reference_odds_beats_pooled_scores_and_keeps_order_within_strata(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.parquet"
    result = run_rerank_strata(
        RerankStrataRequest(
            reference=str(SAMPLE_REFERENCE),
            target=str(SAMPLE_TARGET),
            strata_col="stratum",
            output=str(out),
        )
    )
    frame = pl.read_parquet(out)
    assert frame.columns == [
        *pl.read_csv(SAMPLE_TARGET).columns,
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
    assert result.odds_source == "reference"
    assert result.comparison is not None
    assert result.comparison.auc_reranked > result.comparison.auc_raw + 0.05
    assert [s.stratum for s in result.strata] == ["A", "B", "C"]


def test_one_stratum_keeps_the_raw_ranking(tmp_path: Path) -> None:
    reference = pl.read_csv(SAMPLE_REFERENCE).with_columns(pl.lit("all").alias("stratum"))
    target = pl.read_csv(SAMPLE_TARGET).with_columns(pl.lit("all").alias("stratum"))
    reference.write_csv(tmp_path / "ref.csv")
    target.write_csv(tmp_path / "tgt.csv")
    out = tmp_path / "out.csv"
    run_rerank_strata(
        RerankStrataRequest(
            reference=str(tmp_path / "ref.csv"),
            target=str(tmp_path / "tgt.csv"),
            strata_col="stratum",
            output=str(out),
        )
    )
    frame = pl.read_csv(out)
    expected = rankdata(-frame["score"].to_numpy(), method="min")
    np.testing.assert_array_equal(frame["rerank_rank"].to_numpy(), expected)


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_a_target_stratum_missing_from_the_reference_is_refused_before_writing(
    tmp_path: Path, engine: str
) -> None:
    """The message names both files, in both engines (the memory engine named neither, the
    streaming engine the target only)."""
    target = (
        pl.read_csv(SAMPLE_TARGET)
        .head(5)
        .with_columns(pl.Series("stratum", ["A", "Z", "Z", "B", "A"]))
    )
    target.write_csv(tmp_path / "tgt.csv")
    out = tmp_path / "out.csv"
    request = RerankStrataRequest(
        reference=str(SAMPLE_REFERENCE),
        target=str(tmp_path / "tgt.csv"),
        strata_col="stratum",
        output=str(out),
        engine=engine,  # type: ignore[arg-type]
    )
    with pytest.raises(InputError) as caught:
        run_rerank_strata(request)
    assert str(caught.value) == (
        f"{tmp_path / 'tgt.csv'}: stratum 'Z' of the target has no rows in the reference "
        f"{SAMPLE_REFERENCE} (2 target rows)"
    )
    assert not out.exists()


def test_prevalence_file_sets_the_odds(tmp_path: Path) -> None:
    prevalence = tmp_path / "p.csv"
    prevalence.write_text("stratum,prevalence\nA,0.01\nB,0.05\nC,0.2\n")
    result = run_rerank_strata(
        RerankStrataRequest(
            reference=str(SAMPLE_REFERENCE),
            target=str(SAMPLE_TARGET),
            strata_col="stratum",
            prevalence_file=str(prevalence),
            output=str(tmp_path / "o.csv"),
        )
    )
    assert result.odds_source == "prevalence file"
    odds = {s.stratum: s.stratum_odds for s in result.strata}
    assert odds == pytest.approx({"A": 0.01 / 0.99, "B": 0.05 / 0.95, "C": 0.25}, rel=1e-12)


@pytest.mark.parametrize(("strata_col", "pca_features"), [("stratum", "x"), (None, None)])
def test_strata_come_from_exactly_one_source(
    tmp_path: Path, strata_col: str | None, pca_features: str | None
) -> None:
    request = RerankStrataRequest(
        reference=str(SAMPLE_REFERENCE),
        target=str(SAMPLE_TARGET),
        strata_col=strata_col,
        pca_features=pca_features,
        output="-",
    )
    with pytest.raises(UsageError) as caught:
        run_rerank_strata(request)
    assert str(caught.value) == "give --strata-col COL or --pca-features C1,C2,... (one of them)"


def test_a_stratum_estimated_at_zero_still_ranks(tmp_path: Path) -> None:
    """Stratum a's target scores lie below its reference negatives': its rate is estimated
    at exactly 0, kept at 1e-6 for its odds (with a warning), and its rows stay ranked."""
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
            "score": np.r_[rng.beta(1, 6, 3000), rng.beta(3, 3, 3000)],
        }
    )
    target.write_csv(tmp_path / "tgt.csv")
    warnings: list[str] = []
    result = run_rerank_strata(
        RerankStrataRequest(
            reference=str(tmp_path / "ref.csv"),
            target=str(tmp_path / "tgt.csv"),
            strata_col="st",
            estimate_target_prevalence=True,
            output=str(tmp_path / "o.csv"),
        ),
        warn=warnings.append,
    )
    assert result.target_prevalence is not None
    assert result.target_prevalence["a"].prevalence == 0.0
    assert "stratum 'a': estimated positive rate 0; using 1e-06 for its odds" in warnings
    assert pl.read_csv(tmp_path / "o.csv")["rerank_score"].is_finite().all()


def test_streaming_engine_matches_memory_on_the_sample_strata(tmp_path: Path) -> None:
    # scores of 3 decimals: every grid cell holds one score, so the outputs are equal
    reference, target = tmp_path / "ref.csv", tmp_path / "target.csv"
    for source, copy in ((SAMPLE_REFERENCE, reference), (SAMPLE_TARGET, target)):
        pl.read_csv(source).with_columns(pl.col("score").round(3)).write_csv(copy)
    results = {}
    for engine in ("memory", "streaming"):
        results[engine] = run_rerank_strata(
            RerankStrataRequest(
                reference=str(reference),
                target=str(target),
                strata_col="stratum",
                engine=engine,
                output=str(tmp_path / f"{engine}.csv"),
            )
        )
    memory, streaming = results["memory"], results["streaming"]
    assert (tmp_path / "memory.csv").read_bytes() == (tmp_path / "streaming.csv").read_bytes()
    assert memory.strata == streaming.strata
    note = streaming.streaming
    assert note is not None and note.engine == "streaming"
    assert note.exact_cells == note.reference_cells
    assert memory.comparison is not None and streaming.comparison is not None
    assert note.auc_raw_bound is not None and note.auc_reranked_bound is not None
    assert abs(memory.comparison.auc_raw - streaming.comparison.auc_raw) <= note.auc_raw_bound
    assert (
        abs(memory.comparison.auc_reranked - streaming.comparison.auc_reranked)
        <= note.auc_reranked_bound
    )


def test_weight_kind_is_reported(tmp_path: Path) -> None:
    """The report says what the weights meant; the figures do not change (the only intervals,
    the target prevalences, resample reference rows with their weights in either kind)."""
    reference, plain_target = _files(tmp_path)
    weighted, target = tmp_path / "weighted.csv", tmp_path / "weighted_target.csv"
    for source, path in ((reference, weighted), (plain_target, target)):
        frame = pl.read_csv(source)
        weights = pl.when(pl.col("label") == 1).then(1.0).otherwise(4.0)
        frame.with_columns(w=weights).write_csv(path)
    results = [
        run_rerank_strata(
            RerankStrataRequest(
                reference=str(weighted),
                target=str(target),
                strata_col="stratum",
                output=str(tmp_path / f"{kind}.csv"),
                weight_col="w",
                weight_kind=kind,
                estimate_target_prevalence=True,
            )
        )
        for kind in ("frequency", "importance")
    ]
    payloads = [rerank_strata_payload(r) for r in results]
    assert [p["weight_kind"] for p in payloads] == ["frequency", "importance"]
    assert payloads[0]["target_prevalence"] == payloads[1]["target_prevalence"]
    assert payloads[0]["strata"] == payloads[1]["strata"]


@pytest.mark.parametrize("kind", ["logit", "raw"])
def test_the_reference_grid_takes_the_targets_logistic_function(kind: str) -> None:
    """Logits and margins reach the grid through the logistic function on both sides: the
    reference's streaming pass gives exactly ``elementary.sigmoid``, as the target's rows
    take it (Polars' ``exp`` differed in the last bit for 4% of these values)."""
    from calib_cli.core import elementary as el
    from calib_cli.io.strata_scan import _cell_score

    s = np.random.default_rng(17).normal(0.0, 4.0, 20_000)
    got = (
        pl.LazyFrame({"s": s})
        .select(_cell_score(pl.col("s"), kind).alias("p"))  # type: ignore[arg-type]
        .collect(engine="streaming")["p"]
        .to_numpy()
    )
    np.testing.assert_array_equal(got, el.sigmoid(s))


@pytest.mark.parametrize(
    ("features", "message"),
    [
        ("x,score,x", "--pca-features names 'x' more than once; name each feature column once"),
        (
            "score, x,score,x",
            "--pca-features names 'score', 'x' more than once; name each feature column once",
        ),
        (" , ", "--pca-features needs at least one column name"),
    ],
)
def test_pca_features_name_each_column_once(tmp_path: Path, features: str, message: str) -> None:
    reference, target = _files(tmp_path)
    request = RerankStrataRequest(
        reference=str(reference),
        target=str(target),
        pca_features=features,
        output=str(tmp_path / "out.csv"),
    )
    with pytest.raises(UsageError) as caught:
        run_rerank_strata(request)
    assert str(caught.value) == message
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("kept", [0, 1])
@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_a_labelled_target_of_one_class_is_reranked_without_a_comparison(
    tmp_path: Path, engine: str, kept: int
) -> None:
    """A day without a fraud is a normal batch: its rows are re-ranked exactly as without
    labels, and only the comparison (which needs both classes) is left out, with a warning.
    Before, both engines refused the target with "the labels have no positive rows"."""
    reference, target = _files(tmp_path)
    one_class = tmp_path / "one_class.csv"
    pl.read_csv(target).filter(pl.col("label") == kept).write_csv(one_class)
    unlabelled = tmp_path / "unlabelled.csv"
    pl.read_csv(one_class).drop("label").write_csv(unlabelled)
    outputs, warnings = [], []
    for name, path in (("labelled", one_class), ("unlabelled", unlabelled)):
        out = tmp_path / f"out_{name}.csv"
        result = run_rerank_strata(
            RerankStrataRequest(
                reference=str(reference),
                target=str(path),
                strata_col="stratum",
                output=str(out),
                engine=engine,  # type: ignore[arg-type]
            ),
            warn=warnings.append,
        )
        assert result.comparison is None
        outputs.append(pl.read_csv(out).drop("label", strict=False))
    assert outputs[0].equals(outputs[1])
    missing = "positive" if kept == 0 else "negative"
    assert warnings == [
        f"{one_class}: the target's labels hold no {missing} row (with positive weight): "
        "no comparison of the rankings (its AUC and TPRs need both classes)"
    ]


@pytest.mark.parametrize(("scaling", "cut"), [("standardize", "quantiles"), ("center", "sign")])
def test_pca_strata_weigh_rows_as_repeated_rows(tmp_path: Path, scaling: str, cut: str) -> None:
    """A row of weight 2 counts as two rows in the component and its cut points too (before,
    the weights reached only the label rates: the loadings and cuts were the unweighted ones,
    and 12,672 of 20,000 ranks differed from the repeated rows')."""
    rng = np.random.default_rng(8)
    reference = _rows(1500, rng).with_columns(
        pl.Series("y2", rng.normal(size=1500) * 3.0), pl.Series("w", rng.choice([1, 2, 3], 1500))
    )
    reference = reference.with_columns(x=pl.col("x") + 0.8 * pl.col("y2") * (pl.col("w") - 2))
    target = _rows(800, rng).with_columns(pl.Series("y2", rng.normal(size=800)), w=pl.lit(1))
    repeated = reference.select(pl.all().repeat_by(pl.col("w")).explode()).with_columns(w=pl.lit(1))
    results, outputs = [], []
    for name, frame in (("weighted", reference), ("repeated", repeated)):
        frame.write_csv(tmp_path / f"{name}.csv")
        target.write_csv(tmp_path / "target.csv")
        results.append(
            run_rerank_strata(
                RerankStrataRequest(
                    reference=str(tmp_path / f"{name}.csv"),
                    target=str(tmp_path / "target.csv"),
                    pca_features="x,y2",
                    weight_col="w",
                    pca_scaling=scaling,  # type: ignore[arg-type]
                    pca_cut=cut,  # type: ignore[arg-type]
                    output=str(tmp_path / f"out_{name}.csv"),
                )
            )
        )
        outputs.append(pl.read_csv(tmp_path / f"out_{name}.csv"))
    weighted, expanded = (result.pca for result in results)
    assert weighted is not None and expanded is not None
    for feature in ("x", "y2"):
        assert weighted.loadings[feature] == pytest.approx(expanded.loadings[feature], rel=1e-12)
    np.testing.assert_allclose(weighted.cut_points, expanded.cut_points, rtol=1e-12, atol=1e-15)
    assert outputs[0]["pca_stratum"].equals(outputs[1]["pca_stratum"])
    assert outputs[0]["rerank_rank"].equals(outputs[1]["rerank_rank"])
    unweighted = run_rerank_strata(
        RerankStrataRequest(
            reference=str(tmp_path / "weighted.csv"),
            target=str(tmp_path / "target.csv"),
            pca_features="x,y2",
            pca_scaling=scaling,  # type: ignore[arg-type]
            pca_cut=cut,  # type: ignore[arg-type]
            output=str(tmp_path / "out_unweighted.csv"),
        )
    ).pca
    assert unweighted is not None  # the weights matter: to the cuts, or (sign) to the loadings
    moved = not np.allclose(unweighted.cut_points, weighted.cut_points, rtol=1e-6)
    turned = abs(unweighted.loadings["x"] - weighted.loadings["x"]) > 1e-3
    assert moved or turned


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_a_target_without_the_weight_column_weighs_its_rows_1(tmp_path: Path, engine: str) -> None:
    """A reference sampled with weights (resample --weight-col-out) against a population
    target without them: the target's rows weigh 1, with a warning (it was refused), exactly
    as a target whose column holds 1 everywhere."""
    reference, target = _files(tmp_path)
    weighted = tmp_path / "weighted.csv"
    pl.read_csv(reference).with_columns(iw=pl.lit(2.0)).write_csv(weighted)
    ones = tmp_path / "ones.csv"
    pl.read_csv(target).with_columns(iw=pl.lit(1.0)).write_csv(ones)
    warnings: list[str] = []
    outputs = []
    for name, path in (("without", target), ("ones", ones)):
        result = run_rerank_strata(
            RerankStrataRequest(
                reference=str(weighted),
                target=str(path),
                strata_col="stratum",
                weight_col="iw",
                output=str(tmp_path / f"out_{name}.csv"),
                engine=engine,  # type: ignore[arg-type]
            ),
            warn=warnings.append,
        )
        assert result.comparison is not None
        outputs.append((pl.read_csv(tmp_path / f"out_{name}.csv"), result.comparison))
    (without_rows, without_comparison), (ones_rows, ones_comparison) = outputs
    assert without_rows.equals(ones_rows.drop("iw"))
    assert without_comparison == ones_comparison
    assert warnings == [
        f"{target} has no column 'iw' (--weight-col): its rows weigh 1 in the strata and the "
        "comparison"
    ]


@pytest.mark.parametrize("side", ["reference", "target"])
def test_an_infinite_feature_names_its_file_and_row(tmp_path: Path, side: str) -> None:
    """The check ran on the pooled rows, so a target's row was counted after the reference's
    and no file was named."""
    reference, target = _files(tmp_path)
    bad = tmp_path / "bad.csv"
    frame = pl.read_csv(reference if side == "reference" else target)
    frame.with_columns(
        x=pl.when(pl.int_range(pl.len()) == 6).then(float("-inf")).otherwise(pl.col("x"))
    ).write_csv(bad)
    files = {"reference": str(reference), "target": str(target), side: str(bad)}
    with pytest.raises(InputError) as error:
        run_rerank_strata(
            RerankStrataRequest(**files, pca_features="x,score", output=str(tmp_path / "o.csv"))
        )
    assert str(error.value) == f"{bad}: column 'x' has 1 value infinite (first at row 7: -inf)"


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_flipped_labels_are_warned_per_stratum(tmp_path: Path, engine: str) -> None:
    reference, target = _files(tmp_path)
    warnings: list[str] = []
    run_rerank_strata(
        RerankStrataRequest(
            reference=str(reference),
            target=str(target),
            strata_col="stratum",
            positive_label="0",
            output=str(tmp_path / "o.csv"),
            engine=engine,  # type: ignore[arg-type]
        ),
        warn=warnings.append,
    )
    backwards = [w for w in warnings if "rank its labels backwards" in w]
    assert [w.split("'")[1] for w in backwards] == ["a", "b"]
    assert backwards[0].endswith("; are the labels flipped (--positive-label)?")


def test_fewer_strata_than_asked_are_warned(tmp_path: Path) -> None:
    """A feature of two values cuts into two strata whatever --n-strata asks."""
    reference, target = _files(tmp_path)
    for path in (reference, target):
        frame = pl.read_csv(path)
        frame.with_columns(flag=(pl.col("stratum") == "a").cast(pl.Int64)).write_csv(path)
    warnings: list[str] = []
    result = run_rerank_strata(
        RerankStrataRequest(
            reference=str(reference),
            target=str(target),
            pca_features="flag",
            n_strata=3,
            output=str(tmp_path / "o.csv"),
        ),
        warn=warnings.append,
    )
    assert result.pca is not None and result.pca.n_strata == 2
    assert (
        "--n-strata 3 made 2 strata: the component's tied values leave no room for more cut points"
    ) in warnings


def test_an_unlabelled_target_without_weights_is_not_warned(tmp_path: Path) -> None:
    """With --strata-col and no labels, the target's weights change nothing: no warning."""
    reference, target = _files(tmp_path)
    weighted = tmp_path / "weighted.csv"
    pl.read_csv(reference).with_columns(iw=pl.lit(2.0)).write_csv(weighted)
    plain = tmp_path / "plain.csv"
    pl.read_csv(target).drop("label").write_csv(plain)
    warnings: list[str] = []
    run_rerank_strata(
        RerankStrataRequest(
            reference=str(weighted),
            target=str(plain),
            strata_col="stratum",
            weight_col="iw",
            output=str(tmp_path / "o.csv"),
        ),
        warn=warnings.append,
    )
    assert warnings == []
