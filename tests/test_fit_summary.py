"""recalibrate --fit-summary: the streaming engine's fit made from summary files.

References: the model ``recalibrate --fit FILE`` fits on the same rows through the streaming
engine (the same cells: Platt and beta parameters to 1e-9 relative; measured 1e-15), the
in-memory fit (held-out log loss), and for isotonic the exact fit on the rows whenever the
prefix-sum certificate holds for every cell. Summaries come from ``calib summarize``
(in-process) and from the query of ``summarize --emit-sql --dialect duckdb`` run in DuckDB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_cli.core.chain import apply_chain
from calib_cli.errors import InputError, OptionError, UsageError
from calib_cli.io import write_summary
from calib_cli.report.payloads import recalibrate_payload
from calib_cli.sql.summary import SummaryQuery, summary_metadata, summary_sql
from calib_cli.summaries import summarize_arrays
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize


def _rows(kind: str, n: int, seed: int) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    if kind == "ties":  # two decimals: every 12-bit cell holds one distinct score
        scores = np.round(rng.random(n), 2)
    elif kind == "rare":
        scores = rng.beta(0.3, 30.0, n)
    else:
        scores = rng.beta(0.5, 5.0, n)
    labels = (rng.random(n) < np.clip(1.3 * scores, 0.0, 1.0)).astype(np.int64)
    return scores, labels


def _file(tmp_path: Path, kind: str = "skewed", n: int = 6000, seed: int = 1) -> Path:
    scores, labels = _rows(kind, n, seed)
    day = np.random.default_rng(seed + 50).integers(0, 4, n)
    path = tmp_path / f"{kind}.parquet"
    pl.DataFrame({"score": scores, "label": labels, "day": day}).write_parquet(path)
    return path


def _summarize(source: Path, out: Path, **options: Any) -> Path:
    run_summarize(SummarizeRequest(files=(str(source),), output=str(out), **options))
    return out


def _fit(tmp_path: Path, name: str, **options: Any) -> tuple[Any, dict[str, Any], list[str]]:
    model = tmp_path / f"{name}.json"
    warnings: list[str] = []
    result = run_recalibrate(
        RecalibrateRequest(save_model=str(model), **options), warn=warnings.append
    )
    return result, json.loads(model.read_text()), warnings


def _besides_auc(warnings: list[str]) -> list[str]:
    """The warnings other than the AUC's change (a pooling isotonic or histogram map changes
    the AUC; the fit from a summary warns of it as the fit on rows does)."""
    return [w for w in warnings if "calibration changed the AUC by" not in w]


def _held_out_log_loss(steps: Any, kind: str) -> float:
    scores, labels = _rows(kind, 20_000, 99)
    p = np.clip(apply_chain(steps, scores), 1e-15, 1.0 - 1e-15)
    return float(-np.mean(labels * np.log(p) + (1 - labels) * np.log1p(-p)))


@pytest.mark.parametrize("method", ["platt", "beta"])
def test_logistic_fits_equal_the_streaming_fit_on_the_rows(tmp_path: Path, method: str) -> None:
    source = _file(tmp_path)
    summary = _summarize(source, tmp_path / "s.parquet", by="day")
    _, streamed, _ = _fit(tmp_path, "rows", fit=str(source), method=method, engine="streaming")
    result, saved, _ = _fit(tmp_path, "summary", fit_summaries=(str(summary),), method=method)
    for key, value in streamed["params"].items():
        if isinstance(value, float):
            assert saved["params"][key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
        else:
            assert saved["params"][key] == value, key
    memory, _, _ = _fit(tmp_path, "memory", fit=str(source), method=method, engine="memory")
    exact = _held_out_log_loss(memory.steps, "skewed")
    assert abs(_held_out_log_loss(result.steps, "skewed") - exact) <= 1e-6 * exact
    engine = saved["fitted_on"]["engine"]
    assert engine == {
        "kind": "summary",
        "fitted_on": "summary",
        "summaries": [str(summary)],
        "groups": 4,
        "grid": {"kind": "relative-tails", "mantissa_bits": 12},
    }
    assert saved["fitted_on"]["rows"] == 6000
    assert saved["fitted_on"]["positives"] == streamed["fitted_on"]["positives"]


@pytest.mark.parametrize("strict", [False, True])
def test_isotonic_on_cells_of_single_scores_is_the_exact_fit(tmp_path: Path, strict: bool) -> None:
    """Scores with two decimals: every cell one distinct score, so the certificate holds
    everywhere and the knots are those of the fit on the rows."""
    source = _file(tmp_path, "ties")
    summary = _summarize(source, tmp_path / "s.json")
    _, memory, _ = _fit(tmp_path, "memory", fit=str(source), method="isotonic", strict=strict)
    _, saved, warnings = _fit(
        tmp_path, "summary", fit_summaries=(str(summary),), method="isotonic", strict=strict
    )
    np.testing.assert_allclose(saved["params"]["x_knots"], memory["params"]["x_knots"], rtol=1e-12)
    np.testing.assert_allclose(
        saved["params"]["y_knots"], memory["params"]["y_knots"], rtol=0, atol=1e-12
    )
    engine = saved["fitted_on"]["engine"]
    assert engine["exact"] is True
    assert engine["unresolved_cells"] == 0
    assert engine["cells"] == 101  # the scores 0.00 ... 1.00
    assert _besides_auc(warnings) == []


def test_isotonic_on_coarse_cells_warns_and_says_how_many_are_unresolved(tmp_path: Path) -> None:
    """Continuous scores on the 12-bit grid: the cells at the ends of the fit's blocks stay
    open (held at one value); the model says so, a warning says so, and the fit stays close
    to the exact one (measured held-out log-loss gap 5e-5 relative on 20,000 rows; bounded
    here loosely, the bound the README states is the measured one)."""
    source = _file(tmp_path)
    summary = _summarize(source, tmp_path / "s.parquet")
    result, saved, warnings = _fit(
        tmp_path, "summary", fit_summaries=(str(summary),), method="isotonic"
    )
    engine = saved["fitted_on"]["engine"]
    assert engine["exact"] is False
    assert 0 < engine["unresolved_cells"] < engine["cells"]
    assert 0.0 < engine["unresolved_weight"] < 0.05
    assert len(_besides_auc(warnings)) == 1
    assert "not certified exact" in warnings[0]
    assert f"{engine['unresolved_cells']} of its {engine['cells']} cells" in warnings[0]
    assert "calibration changed the AUC by" in warnings[1]  # pooling, as on the rows
    memory, _, _ = _fit(tmp_path, "memory", fit=str(source), method="isotonic")
    exact = _held_out_log_loss(memory.steps, "skewed")
    assert abs(_held_out_log_loss(result.steps, "skewed") - exact) <= 1e-3 * exact


def test_isotonic_on_a_finer_summary_is_certified_exact(tmp_path: Path) -> None:
    """The same rows on a 24-bit grid (the Python API; summarize writes 12 bits): no cell
    open, the knots of the fit on the rows."""
    scores, labels = _rows("skewed", 6000, 1)
    path = tmp_path / "fine.parquet"
    write_summary(summarize_arrays(labels, scores, mantissa_bits=24), str(path))
    source = tmp_path / "rows.parquet"
    pl.DataFrame({"score": scores, "label": labels}).write_parquet(source)
    _, memory, _ = _fit(tmp_path, "memory", fit=str(source), method="isotonic")
    _, saved, warnings = _fit(tmp_path, "summary", fit_summaries=(str(path),), method="isotonic")
    assert saved["fitted_on"]["engine"]["exact"] is True
    assert saved["params"]["x_knots"] == memory["params"]["x_knots"]
    np.testing.assert_allclose(
        saved["params"]["y_knots"], memory["params"]["y_knots"], rtol=0, atol=1e-12
    )
    assert _besides_auc(warnings) == []


def test_histogram_on_a_12_bit_summary_is_refused_naming_the_bits(tmp_path: Path) -> None:
    summary = _summarize(_file(tmp_path), tmp_path / "s.parquet")
    with pytest.raises(InputError) as error:
        _fit(tmp_path, "h", fit_summaries=(str(summary),), method="histogram")
    message = str(error.value)
    assert message.startswith(f"{summary}: --method histogram needs a summary on a grid of at")
    assert "least 20 mantissa bits" in message
    assert "this summary's grid has 12" in message
    assert message.endswith("or choose platt, isotonic, beta")


def test_histogram_on_a_20_bit_summary_is_the_streaming_fit(tmp_path: Path) -> None:
    scores, labels = _rows("skewed", 6000, 1)
    path = tmp_path / "fine.parquet"
    write_summary(summarize_arrays(labels, scores, mantissa_bits=20), str(path))
    source = tmp_path / "rows.parquet"
    pl.DataFrame({"score": scores, "label": labels}).write_parquet(source)
    _, streamed, _ = _fit(tmp_path, "rows", fit=str(source), method="histogram", engine="streaming")
    _, saved, _ = _fit(tmp_path, "summary", fit_summaries=(str(path),), method="histogram")
    np.testing.assert_allclose(saved["params"]["edges"], streamed["params"]["edges"], rtol=1e-12)
    np.testing.assert_allclose(saved["params"]["rates"], streamed["params"]["rates"], rtol=1e-12)
    # the same from `calib summarize --grid-bits 20` and from the engine's query on 20 bits
    ours = _summarize(source, tmp_path / "ours.parquet", grid_bits=20)
    engine = tmp_path / "engine.parquet"
    query = SummaryQuery(table=f"read_parquet('{source}')", mantissa_bits=20)
    duckdb.connect().execute(
        f"COPY ({summary_sql(query, dialect_name='duckdb')}) TO '{engine}' (FORMAT parquet)"
    )
    for name, summary in (("ours", ours), ("engine", engine)):
        _, fitted, _ = _fit(tmp_path, name, fit_summaries=(str(summary),), method="histogram")
        assert fitted["fitted_on"]["engine"]["grid"]["mantissa_bits"] == 20
        for key in ("edges", "rates"):
            np.testing.assert_allclose(fitted["params"][key], saved["params"][key], rtol=1e-12)


@pytest.mark.parametrize("bits", [11, 31])
def test_grid_bits_outside_12_to_30_are_refused(tmp_path: Path, bits: int) -> None:
    with pytest.raises(
        OptionError, match=f"--grid-bits must be an integer from 12 to 30, got {bits}"
    ):
        _summarize(_file(tmp_path), tmp_path / "s.parquet", grid_bits=bits)


def test_summaries_merge_and_groups_pool(tmp_path: Path) -> None:
    """Two files' summaries fit as the summary of both; a --by summary as one without."""
    scores, labels = _rows("skewed", 6000, 1)
    halves = []
    for index, part in enumerate((slice(0, 2500), slice(2500, None))):
        path = tmp_path / f"half{index}.parquet"
        pl.DataFrame({"score": scores[part], "label": labels[part]}).write_parquet(path)
        halves.append(str(_summarize(path, tmp_path / f"s{index}.parquet")))
    whole = tmp_path / "whole.parquet"
    pl.DataFrame({"score": scores, "label": labels}).write_parquet(whole)
    one = _summarize(whole, tmp_path / "one.parquet")
    _, merged, _ = _fit(tmp_path, "merged", fit_summaries=tuple(halves), method="platt")
    _, single, _ = _fit(tmp_path, "single", fit_summaries=(str(one),), method="platt")
    for key in ("slope", "intercept"):
        assert merged["params"][key] == pytest.approx(single["params"][key], rel=1e-12)
    assert merged["fitted_on"]["file"] == "2 summaries of 'score'"
    assert merged["fitted_on"]["engine"]["summaries"] == halves


def test_an_engine_summary_from_duckdb_fits_the_same_model(tmp_path: Path) -> None:
    """summarize --emit-sql --dialect duckdb run in DuckDB, saved as Parquet the way Spark
    saves it (the metadata in its calib_summary column): the same model as from calib
    summarize, for every method a 12-bit summary supports."""
    source = _file(tmp_path, n=4000)
    ours = _summarize(source, tmp_path / "calib.parquet", by="day")
    query = SummaryQuery(table=f"read_parquet('{source}')", by="day")
    engine = tmp_path / "engine.parquet"
    con = duckdb.connect()
    con.execute(
        f"COPY ({summary_sql(query, dialect_name='duckdb')}) TO '{engine}' (FORMAT parquet)"
    )
    assert summary_metadata(query)["grid"]["mantissa_bits"] == 12
    for method in ("platt", "beta", "isotonic"):
        _, a, _ = _fit(tmp_path, f"calib_{method}", fit_summaries=(str(ours),), method=method)
        _, b, _ = _fit(tmp_path, f"engine_{method}", fit_summaries=(str(engine),), method=method)
        for key, value in a["params"].items():
            if isinstance(value, list):
                np.testing.assert_allclose(b["params"][key], value, rtol=1e-9, atol=1e-12)
            elif isinstance(value, float):
                assert b["params"][key] == pytest.approx(value, rel=1e-9, abs=1e-12)
            else:
                assert b["params"][key] == value
        assert b["fitted_on"]["rows"] == a["fitted_on"]["rows"] == 4000


def test_a_sampled_fit_puts_the_prior_after_the_map_and_applies_to_a_file(tmp_path: Path) -> None:
    source = _file(tmp_path)
    summary = _summarize(source, tmp_path / "s.parquet")
    out = tmp_path / "out.parquet"
    result, saved, _ = _fit(
        tmp_path,
        "chain",
        fit_summaries=(str(summary),),
        method="platt",
        negative_rate=0.1,
        fit_data="sampled",
        file=str(source),
        output=str(out),
    )
    assert saved["kind"] == "chain"
    assert [step["kind"] for step in saved["params"]["steps"]] == ["platt", "prior"]
    assert saved["fitted_on"]["fit_data"] == "sampled"
    applied = run_recalibrate(
        RecalibrateRequest(
            file=str(source), model=str(tmp_path / "chain.json"), output=str(tmp_path / "o.parquet")
        )
    )
    assert pl.read_parquet(out).equals(pl.read_parquet(tmp_path / "o.parquet"))
    assert applied.step_kinds == result.step_kinds
    payload = recalibrate_payload(result)
    assert payload["fit"]["file"] == str(summary)
    assert payload["fit"]["rows"] == 6000


def test_the_fit_effect_before_is_the_summarys_exact_figures(tmp_path: Path) -> None:
    """Before: log loss, Brier and ECE of the rows (exact from the summary); after: the rows
    calibrated, within the cells' width (here to 1e-6 relative of the figures on the rows)."""
    source = _file(tmp_path)
    summary = _summarize(source, tmp_path / "s.parquet")
    from_summary = recalibrate_payload(
        _fit(tmp_path, "s", fit_summaries=(str(summary),), method="platt")[0]
    )["fit"]
    on_rows = recalibrate_payload(
        _fit(tmp_path, "r", fit=str(source), method="platt", engine="memory")[0]
    )["fit"]
    for figure in ("log_loss", "brier", "ece"):
        assert from_summary["before"][figure] == pytest.approx(on_rows["before"][figure], rel=1e-12)
        assert from_summary["after"][figure] == pytest.approx(on_rows["after"][figure], rel=1e-5)
    assert from_summary["before"]["auc"] == pytest.approx(on_rows["before"]["auc"], abs=1e-4)
    assert from_summary["mean_score_before"] == pytest.approx(
        on_rows["mean_score_before"], rel=1e-12
    )
    assert from_summary["base_rate"] == on_rows["base_rate"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "--fit-summary with --method auto needs folds: .* --fold-col"),
        ({"method": "auto"}, "--fit-summary with --method auto needs folds"),
        ({"method": "platt", "fold_col": "fold"}, "--method platt needs none"),
        ({"method": "prior"}, "--method prior fits nothing"),
        ({"method": "platt", "score_kind": "logit"}, "--score-kind logit scores need --fit FILE"),
        ({"method": "platt", "negative_rate": 0.1}, "needs --fit-data sampled"),
        ({"method": "platt", "fit": "x.csv"}, "got --fit and --fit-summary"),
    ],
)
def test_what_a_summary_fit_cannot_do_is_refused_before_reading(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        run_recalibrate(
            RecalibrateRequest(
                fit_summaries=(str(tmp_path / "missing.parquet"),),
                save_model=str(tmp_path / "m.json"),
                **options,
            )
        )


def test_several_score_columns_need_score_col(tmp_path: Path) -> None:
    source = tmp_path / "two.parquet"
    scores, labels = _rows("skewed", 3000, 1)
    pl.DataFrame({"a": scores, "b": scores**2, "label": labels}).write_parquet(source)
    _summarize(source, tmp_path / "s.parquet", score_cols=("a", "b"))
    paths = (str(tmp_path / "s.a.parquet"), str(tmp_path / "s.b.parquet"))
    with pytest.raises(UsageError, match=r"several score columns \('a', 'b'\): choose one"):
        _fit(tmp_path, "m", fit_summaries=paths, method="platt")
    _, saved, _ = _fit(tmp_path, "m", fit_summaries=paths, method="platt", score_col="b")
    assert saved["fitted_on"]["columns"]["score"] == "b"
    assert saved["fitted_on"]["engine"]["summaries"] == [paths[1]]


def test_a_stratified_record_after_the_map_reads_the_strata_from_the_summary_groups(
    tmp_path: Path,
) -> None:
    """--fit-data sampled with a stratified sampling record: the map as on the rows, and the
    figures after calibration from the summary's --by groups as strata (without them the
    figures after are left out, with a warning)."""
    from calib_cli.workflows.resample import ResampleRequest, run_resample

    rng = np.random.default_rng(5)
    n = 8000
    scores = rng.beta(0.5, 5.0, n)
    frame = pl.DataFrame(
        {
            "id": np.arange(n),
            "score": scores,
            "label": (rng.random(n) < scores).astype(np.int64),
            "segment": rng.choice(["a", "b"], n),
        }
    )
    frame.write_parquet(tmp_path / "rows.parquet")
    (tmp_path / "rates.csv").write_text("stratum,negative_rate\na,0.1\nb,0.2\n")
    sample = tmp_path / "sample.parquet"
    run_resample(
        ResampleRequest(
            file=str(tmp_path / "rows.parquet"),
            output=str(sample),
            strata_col="segment",
            rates_file=str(tmp_path / "rates.csv"),
            key_col="id",
        )
    )
    record = f"{sample}.sampling.json"
    options: dict[str, Any] = {"method": "platt", "sampling_record": record, "fit_data": "sampled"}
    rows, saved_rows, _ = _fit(tmp_path, "rows", fit=str(sample), engine="memory", **options)
    grouped = _summarize(sample, tmp_path / "by.parquet", by="segment")
    summary, saved, warnings = _fit(tmp_path, "by", fit_summaries=(str(grouped),), **options)
    assert _besides_auc(warnings) == []
    assert [s["kind"] for s in saved["params"]["steps"]] == ["platt", "prior"]
    for key in ("slope", "intercept"):
        assert saved["params"]["steps"][0]["params"][key] == pytest.approx(
            saved_rows["params"]["steps"][0]["params"][key], rel=1e-8
        )
    after, expected = (recalibrate_payload(r)["fit"]["after"] for r in (summary, rows))
    for figure in ("log_loss", "brier"):
        assert after[figure] == pytest.approx(expected[figure], rel=1e-5)
    plain = _summarize(sample, tmp_path / "plain.parquet")
    blind, _, warned = _fit(tmp_path, "plain", fit_summaries=(str(plain),), **options)
    assert recalibrate_payload(blind)["fit"]["after"] is None
    assert warned == [
        f"{plain}: the prior correction is per stratum ('segment') and the summary does not "
        "keep every row's stratum (summarise with --by segment): the figures after "
        "calibration are left out"
    ]


def test_a_directory_of_part_files_or_a_quoted_glob_names_the_summaries(tmp_path: Path) -> None:
    """As Spark writes a query's result: part files beside _SUCCESS, in a directory; or a
    pattern left to calib. Both fit the model of the files named one by one."""
    from calib_cli.errors import MissingInputError
    from calib_cli.workflows.summary_paths import expand_summary_paths

    scores, labels = _rows("skewed", 4000, 2)
    folder = tmp_path / "day=2026-11-01"
    folder.mkdir()
    for index, part in enumerate((slice(0, 1500), slice(1500, None))):
        rows = tmp_path / f"rows{index}.parquet"
        pl.DataFrame({"score": scores[part], "label": labels[part]}).write_parquet(rows)
        _summarize(rows, folder / f"part-0000{index}.parquet")
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-00000.parquet.crc").write_text("")
    parts = (str(folder / "part-00000.parquet"), str(folder / "part-00001.parquet"))
    assert expand_summary_paths([str(folder)]) == parts
    assert expand_summary_paths([str(tmp_path / "day=*" / "part-*.parquet")]) == parts
    _, named, _ = _fit(tmp_path, "named", fit_summaries=parts, method="platt")
    _, listed, _ = _fit(tmp_path, "listed", fit_summaries=(str(folder),), method="platt")
    assert listed["params"] == named["params"]
    assert listed["fitted_on"]["engine"]["summaries"] == list(parts)
    (tmp_path / "empty").mkdir()
    with pytest.raises(MissingInputError, match="a directory without summary files"):
        expand_summary_paths([str(tmp_path / "empty")])
    with pytest.raises(MissingInputError, match="no file matches this pattern"):
        expand_summary_paths([str(tmp_path / "nothing-*.parquet")])
    # a file named twice (a glob over its directory, or ./ spelled) would count its rows twice
    twice = "this summary is given twice, and merged summaries add up"
    with pytest.raises(UsageError, match=twice):
        expand_summary_paths([str(folder), str(tmp_path / "day=*" / "part-00001.parquet")])
    with pytest.raises(UsageError, match=twice):
        _fit(
            tmp_path,
            "twice",
            fit_summaries=(parts[0], f"{folder}/./part-00000.parquet"),
            method="platt",
        )


def test_reliability_refuses_a_summary_given_twice(tmp_path: Path) -> None:
    """Two overlapping globs gave n = 40,000 for a summary of 20,000 rows."""
    from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability

    scores, labels = _rows("skewed", 2000, 3)
    rows = tmp_path / "rows.parquet"
    pl.DataFrame({"score": scores, "label": labels}).write_parquet(rows)
    _summarize(rows, tmp_path / "s.parquet")
    once = run_reliability(
        ReliabilityRequest(file=None, from_summaries=(str(tmp_path / "s.parquet"),))
    )
    assert once.entries[0].summary.n == 2000
    with pytest.raises(UsageError, match=r"s\.parquet: this summary is given twice"):
        run_reliability(
            ReliabilityRequest(
                file=None,
                from_summaries=(str(tmp_path / "s.parquet"), str(tmp_path / "./s.parquet")),
            )
        )


def _duckdb_summary(tmp_path: Path) -> tuple[Path, str, Any, Path]:
    """The rows' file, the table expression reading it, a DuckDB connection and the 12-bit
    summary DuckDB made of it (the engine's own query)."""
    source = _file(tmp_path)
    table = f"read_parquet('{source}')"
    con = duckdb.connect()
    base = tmp_path / "base.parquet"
    base_sql = summary_sql(SummaryQuery(table=table), dialect_name="duckdb")
    con.execute(f"COPY ({base_sql}) TO '{base}' (FORMAT parquet)")
    return source, table, con, base


@pytest.mark.parametrize("strict", [False, True])
def test_refinement_queries_run_in_duckdb_make_the_isotonic_fit_exact(
    tmp_path: Path, strict: bool
) -> None:
    """The streaming fit's refinement passes, through the engine: --refine-sql writes the
    summary query of the open cells' rows on a finer grid, DuckDB runs it, --refine-summary
    reads the result; within a few rounds no cell is open and the knots are those of the fit
    on the rows (block ends exactly; values and strict centres to float summation)."""
    source, table, con, base = _duckdb_summary(tmp_path)
    _, memory, _ = _fit(tmp_path, "memory", fit=str(source), method="isotonic", strict=strict)
    refined: list[str] = []
    for index in range(6):
        query = tmp_path / f"refine{index}.sql"
        _, saved, warnings = _fit(
            tmp_path, "summary", fit_summaries=(str(base),), method="isotonic", strict=strict,
            refine_summaries=tuple(refined), refine_sql=str(query), refine_dialect="duckdb",
            refine_table=table,
        )  # fmt: skip
        engine = saved["fitted_on"]["engine"]
        if engine["exact"]:
            assert _besides_auc(warnings) == [] and not query.exists()
            break
        assert warnings[0].startswith(f"{base}: wrote the query that summarises the rows of")
        out = tmp_path / f"refined{index}.parquet"
        con.execute(f"COPY ({query.read_text()}) TO '{out}' (FORMAT parquet)")
        refined.append(str(out))
    assert engine["exact"] is True
    assert 1 <= len(refined) <= 3
    assert engine["refinement_summaries"] == refined
    assert engine["resolved_cells"] > 0
    if strict:
        np.testing.assert_allclose(
            saved["params"]["x_knots"], memory["params"]["x_knots"], rtol=1e-12
        )
    else:
        assert saved["params"]["x_knots"] == memory["params"]["x_knots"]
    np.testing.assert_allclose(
        saved["params"]["y_knots"], memory["params"]["y_knots"], rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("n_bins", [10, 60])
def test_refinement_queries_run_in_duckdb_make_the_histogram_fit_exact(
    tmp_path: Path, n_bins: int
) -> None:
    """A 12-bit summary of continuous scores cannot give the histogram (its edges fall in
    cells of several scores): --refine-sql writes the summary query of those cells' rows on a
    finer grid and refuses to fit (no model); DuckDB runs it, and the fit again with
    --refine-summary is the fit on the rows, edges and rates bit for bit."""
    source, table, con, base = _duckdb_summary(tmp_path)
    _, rows, _ = _fit(tmp_path, "rows", fit=str(source), method="histogram", bins=n_bins,
                      engine="memory")  # fmt: skip
    refined: list[str] = []
    for index in range(4):
        query = tmp_path / f"refine{index}.sql"
        options = dict(
            fit_summaries=(str(base),), method="histogram", bins=n_bins,
            refine_summaries=tuple(refined), refine_sql=str(query), refine_dialect="duckdb",
            refine_table=table,
        )  # fmt: skip
        try:
            _, saved, _ = _fit(tmp_path, "summary", **options)
        except InputError as error:
            assert str(error).startswith(f"{base}: ") and "no model saved" in str(error)
            assert "--refine-summary RESULT" in str(error)
            assert not (tmp_path / "summary.json").exists()
            out = tmp_path / f"refined{index}.parquet"
            con.execute(f"COPY ({query.read_text()}) TO '{out}' (FORMAT parquet)")
            refined.append(str(out))
            continue
        break
    assert 1 <= len(refined) <= 2
    engine = saved["fitted_on"]["engine"]
    assert engine["exact"] is True and engine["refinement_summaries"] == refined
    assert 0 < engine["resolved_cells"] < engine["cells"]
    assert saved["params"] == rows["params"]


def test_a_20_bit_summary_refined_in_duckdb_gives_the_exact_histogram(tmp_path: Path) -> None:
    """Scores packed a billionth apart put several in each 20-bit cell: the fit on the cells
    is not exact, so --refine-sql writes the query and warns, saving the fit on the cells;
    with the query's result the fit is that of the rows."""
    rng = np.random.default_rng(4)
    scores = rng.choice([0.15, 0.35, 0.55, 0.75], 4000) + rng.uniform(0.0, 1e-9, 4000)
    labels = (rng.random(4000) < scores).astype(np.int64)
    source = tmp_path / "packed.parquet"
    pl.DataFrame({"score": scores, "label": labels}).write_parquet(source)
    base = _summarize(source, tmp_path / "base20.parquet", grid_bits=20)
    table = f"read_parquet('{source}')"
    query = tmp_path / "refine.sql"
    sql = {"refine_sql": str(query), "refine_dialect": "duckdb", "refine_table": table}
    _, cells, warnings = _fit(
        tmp_path, "cells", fit_summaries=(str(base),), method="histogram", **sql
    )
    others = _besides_auc(warnings)
    assert len(others) == 1 and "the fit on the summary's 20-bit cells" in others[0]
    refined = tmp_path / "refined.parquet"
    duckdb.connect().execute(f"COPY ({query.read_text()}) TO '{refined}' (FORMAT parquet)")
    _, exact, _ = _fit(tmp_path, "exact", fit_summaries=(str(base),), method="histogram",
                       refine_summaries=(str(refined),))  # fmt: skip
    _, rows, _ = _fit(tmp_path, "rows", fit=str(source), method="histogram", engine="memory")
    assert exact["params"] == rows["params"] != cells["params"]
    assert exact["fitted_on"]["engine"]["exact"] is True


def test_refinement_options_are_checked(tmp_path: Path) -> None:
    source = _file(tmp_path)
    base = _summarize(source, tmp_path / "s.parquet")
    with pytest.raises(UsageError, match="--refine-sql needs --dialect and --table"):
        _fit(tmp_path, "m", fit_summaries=(str(base),), method="isotonic", refine_sql="q.sql")
    with pytest.raises(UsageError, match=r"--refine-sql needs --table \(the table"):
        _fit(tmp_path, "m", fit_summaries=(str(base),), method="isotonic", refine_sql="q.sql",
             refine_dialect="duckdb")  # fmt: skip
    with pytest.raises(UsageError, match=r"--refine-sql needs --table \(the table"):
        _fit(tmp_path, "m", fit_summaries=(str(base),), method="isotonic", refine_sql="q.sql",
             refine_dialect="duckdb", refine_table="")  # fmt: skip
    with pytest.raises(UsageError, match="--fit-summary and --method isotonic or histogram"):
        _fit(tmp_path, "m", fit_summaries=(str(base),), method="platt", refine_sql="q.sql",
             refine_dialect="duckdb", refine_table="t")  # fmt: skip
    scores, labels = _rows("skewed", 6000, 7)  # other rows: the cells' weights differ
    other = tmp_path / "other.parquet"
    write_summary(summarize_arrays(labels, scores, mantissa_bits=52), str(other))
    for method in ("isotonic", "histogram"):  # one check of the refinement, both fits
        with pytest.raises(InputError, match="must summarise every row of the cells it refines"):
            _fit(tmp_path, "m", fit_summaries=(str(base),), method=method,
                 refine_summaries=(str(other),))  # fmt: skip
    coarse = tmp_path / "coarse.parquet"
    write_summary(summarize_arrays(labels, scores, mantissa_bits=8), str(coarse))
    with pytest.raises(InputError, match="must be on a finer grid than the summary's 12"):
        _fit(tmp_path, "m", fit_summaries=(str(base),), method="isotonic",
             refine_summaries=(str(coarse),))  # fmt: skip


@pytest.mark.parametrize("name", ["duckdb", "spark", "bigquery", "snowflake", "postgres"])
def test_the_refinement_query_parses_in_every_dialect(tmp_path: Path, name: str) -> None:
    import sqlglot

    base = _summarize(_file(tmp_path), tmp_path / "s.parquet")
    query = tmp_path / "q.sql"
    _fit(tmp_path, "m", fit_summaries=(str(base),), method="isotonic", refine_sql=str(query),
         refine_dialect=name, refine_table="db.scores")  # fmt: skip
    tree = sqlglot.parse_one(query.read_text(), read=name)
    assert isinstance(tree, sqlglot.exp.Select)
    inner = [s for s in tree.find_all(sqlglot.exp.Select) if s.args.get("where") is not None]
    assert any("db.scores" in s.sql(dialect=name) for s in inner)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(30, 300),
    bits=st.sampled_from([2, 4, 8]),
    strict=st.booleans(),
)
def test_refining_the_open_cells_always_ends_at_the_fit_on_the_rows(
    seed: int, n: int, bits: int, strict: bool
) -> None:
    """Whatever the rows and the grid: summarise the rows of the open cells on the grid the
    fit asks for, refit, repeat; the rounds end, and the knots are those of fit_isotonic."""
    from calib_cli.core.isotonic import fit_isotonic
    from calib_cli.workflows.isotonic_stream import fit_isotonic_summary

    rng = np.random.default_rng(seed)
    scores = np.round(rng.beta(0.7, 2.0, n), int(rng.integers(2, 6)))
    labels = (rng.random(n) < scores).astype(np.int64)
    labels[:2] = [0, 1]
    weights = rng.choice([0.0, 1.0, 2.5], n)
    weights[:2] = 1.0
    summary = summarize_arrays(labels, scores, sample_weight=weights, mantissa_bits=bits)
    options = {"strict": strict, "eps": 1e-6}
    refinements: list[tuple[str, Any]] = []
    for _ in range(12):
        fit = fit_isotonic_summary(summary, options=options, refinements=refinements)
        if fit.open is None:
            break
        inside = np.zeros(n, dtype=bool)
        for lo, hi in zip(fit.open.lower, fit.open.upper, strict=True):
            inside |= (scores >= lo) & (scores <= hi)
        finer = summarize_arrays(labels[inside], scores[inside], sample_weight=weights[inside],
                                 mantissa_bits=fit.open.to_bits)  # fmt: skip
        refinements.append((f"round{len(refinements)}", finer))
    assert fit.exact
    exact = fit_isotonic(scores, labels, sample_weight=weights, **options)
    np.testing.assert_allclose(fit.params.x_knots, exact.x_knots, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fit.params.y_knots, exact.y_knots, rtol=0, atol=1e-12)


def _fold_file(tmp_path: Path, n: int = 20_000) -> Path:
    scores, labels = _rows("skewed", n, 11)
    fold = (np.arange(n) * 7919) % 5  # a fold column, as an engine's hash of a key gives
    path = tmp_path / "folds.parquet"
    pl.DataFrame(
        {"id": np.arange(n), "score": scores, "label": labels, "fold": fold}
    ).write_parquet(path)
    return path


def test_auto_on_summaries_cross_validates_on_their_fold_groups(tmp_path: Path) -> None:
    """--fit-summary --method auto --fold-col: each candidate fitted on the other groups'
    cells and scored on the group's: each log loss within its bound plus the cell fit's own
    error of the in-memory cross-validation on the rows with the same folds (maps fitted on
    the rows: the reference), the same choice, and the chosen method's model as if named."""
    from calib_cli.core.metrics import log_loss
    from calib_cli.core.selection import apply_calibrator, fit_calibrator

    source = _fold_file(tmp_path)
    summary = _summarize(source, tmp_path / "s.parquet", by="fold", grid_bits=20)
    result, saved, warnings = _fit(
        tmp_path, "auto", fit_summaries=(str(summary),), method="auto", fold_col="fold"
    )
    choice = result.choice
    assert choice is not None and (choice.folds, choice.n_folds) == ("groups", 5)
    assert [c.method for c in choice.candidates] == ["platt", "isotonic", "beta", "histogram"]
    frame = pl.read_parquet(source)
    scores, labels, fold = (frame[c].to_numpy() for c in ("score", "label", "fold"))
    exact = {}
    for method in ("platt", "isotonic", "beta", "histogram"):
        p = np.empty(scores.size)
        for k in range(5):
            train, test = fold != k, fold == k
            params = (
                fit_calibrator(method, scores[train], labels[train], n_bins=10)
                if (method == "histogram")
                else fit_calibrator(method, scores[train], labels[train])
            )
            p[test] = apply_calibrator(params, scores[test])
        exact[method] = log_loss(labels, p)
    for row in choice.candidates:
        assert abs(row.cv_log_loss - exact[row.method]) <= row.cv_log_loss_bound + 2e-5, row
    assert choice.chosen == min(exact, key=lambda m: exact[m])
    chosen_by = saved["fitted_on"]["engine"].pop("chosen_by")
    assert chosen_by["folds"] == "groups" and chosen_by["fold_col"] == "fold"
    _, named, _ = _fit(tmp_path, "named", fit_summaries=(str(summary),), method=choice.chosen)
    assert saved == named
    assert not warnings or all("left out" not in w for w in warnings)


def test_auto_on_a_12_bit_summary_leaves_the_histogram_out_and_says_so(tmp_path: Path) -> None:
    summary = _summarize(_fold_file(tmp_path, 8000), tmp_path / "s.parquet", by="fold")
    result, _, warnings = _fit(
        tmp_path, "auto", fit_summaries=(str(summary),), method="auto", fold_col="fold"
    )
    assert [c.method for c in result.choice.candidates] == ["platt", "isotonic", "beta"]
    assert any("left out histogram" in w and "--grid-bits 20" in w for w in warnings)


def test_auto_on_summaries_refuses_another_fold_column_and_a_single_group(tmp_path: Path) -> None:
    source = _fold_file(tmp_path, 4000)
    by_fold = _summarize(source, tmp_path / "a.parquet", by="fold")
    with pytest.raises(
        InputError, match="--fold-col 'day', but the summaries have the --by column 'fold'"
    ):
        _fit(tmp_path, "x", fit_summaries=(str(by_fold),), method="auto", fold_col="day")
    pooled = _summarize(source, tmp_path / "b.parquet")
    with pytest.raises(InputError, match="the summaries have no --by column"):
        _fit(tmp_path, "y", fit_summaries=(str(pooled),), method="auto", fold_col="fold")
    with pytest.raises(UsageError, match="--fit FILE deals its own folds"):
        _fit(tmp_path, "z", fit=str(source), method="auto", fold_col="fold")


def test_auto_on_a_duckdb_summary_with_hashed_folds(tmp_path: Path) -> None:
    """The README's recipe: folds made in the engine by a hash of a key, the summary query of
    summarize --emit-sql --by fold run in DuckDB, and auto on it: the choice and the model
    of the same recipe summarised by calib."""
    source = _fold_file(tmp_path, 6000)
    con = duckdb.connect()
    con.execute(
        f"CREATE VIEW t AS SELECT score, label, hash(id) % 5 AS fold FROM read_parquet('{source}')"
    )
    query = SummaryQuery(table="t", by="fold")
    engine = tmp_path / "engine.parquet"
    con.execute(
        f"COPY ({summary_sql(query, dialect_name='duckdb')}) TO '{engine}' (FORMAT parquet)"
    )
    rows = tmp_path / "rows.parquet"
    con.execute(f"COPY (SELECT * FROM t) TO '{rows}' (FORMAT parquet)")
    ours = _summarize(rows, tmp_path / "calib.parquet", by="fold")
    a, model_a, _ = _fit(
        tmp_path, "a", fit_summaries=(str(engine),), method="auto", fold_col="fold"
    )
    b, model_b, _ = _fit(tmp_path, "b", fit_summaries=(str(ours),), method="auto", fold_col="fold")
    assert a.choice.chosen == b.choice.chosen and a.choice.n_folds == 5
    for x, y in zip(a.choice.candidates, b.choice.candidates, strict=True):
        assert x.cv_log_loss == pytest.approx(y.cv_log_loss, rel=1e-9)
    assert model_a["kind"] == model_b["kind"] == a.choice.chosen


def test_fold_columns_with_missing_values_or_too_many_groups_are_refused(tmp_path: Path) -> None:
    n = 3000
    scores, labels = _rows("skewed", n, 12)
    fold = np.arange(n) % 5
    frame = pl.DataFrame({"score": scores, "label": labels, "fold": fold, "id": np.arange(n)})
    missing = frame.with_columns(
        fold=pl.when(pl.col("id") < 10).then(None).otherwise(pl.col("fold"))
    )
    path = tmp_path / "m.parquet"
    missing.write_parquet(path)
    summary = _summarize(path, tmp_path / "ms.parquet", by="fold")
    with pytest.raises(InputError, match="--fold-col 'fold' is missing on some rows"):
        _fit(tmp_path, "a", fit_summaries=(str(summary),), method="auto", fold_col="fold")
    path = tmp_path / "ids.parquet"
    frame.write_parquet(path)
    summary = _summarize(path, tmp_path / "is.parquet", by="id")
    with pytest.raises(InputError, match="has 3000 groups: cross-validation takes 2 to 100"):
        _fit(tmp_path, "b", fit_summaries=(str(summary),), method="auto", fold_col="id")


@pytest.mark.parametrize("kind", ["ties", "sparse"])
def test_a_histogram_on_a_12_bit_summary_when_every_edge_is_one_score(
    tmp_path: Path, kind: str
) -> None:
    """A 12-bit summary gives the histogram of the rows exactly when each equal-mass edge
    falls on a cell of one distinct score: rounded scores (ties), or few rows per cell; the
    model is the in-memory fit's, recorded exact."""
    if kind == "ties":
        source = _file(tmp_path, "ties", n=8000)
    else:
        rng = np.random.default_rng(3)
        z = rng.normal(-2.0, 1.5, 6000)  # an over-confident score over many binades
        scores = 1.0 / (1.0 + np.exp(-2.5 * z))
        labels = (rng.random(6000) < 1.0 / (1.0 + np.exp(-z))).astype(np.int64)
        source = tmp_path / "sparse.parquet"
        pl.DataFrame({"score": scores, "label": labels}).write_parquet(source)
    summary = _summarize(source, tmp_path / "s.parquet")
    _, saved, _ = _fit(tmp_path, "summary", fit_summaries=(str(summary),), method="histogram")
    _, rows, _ = _fit(tmp_path, "rows", fit=str(source), method="histogram", engine="memory")
    assert saved["params"] == rows["params"]
    assert saved["fitted_on"]["engine"]["exact"] is True


def test_auto_on_a_12_bit_summary_keeps_the_histogram_when_its_fit_is_exact(
    tmp_path: Path,
) -> None:
    # scores on a hundredth: every 12-bit cell is one score, so the histogram's fit on the
    # summary is the fit on the rows, and auto compares it (left out only when it is not)
    scores, labels = _rows("ties", 8000, 13)
    source = tmp_path / "ties.parquet"
    pl.DataFrame({"score": scores, "label": labels, "fold": np.arange(8000) % 4}).write_parquet(
        source
    )
    summary = _summarize(source, tmp_path / "s.parquet", by="fold")
    result, saved, warnings = _fit(
        tmp_path, "auto", fit_summaries=(str(summary),), method="auto", fold_col="fold"
    )
    assert [c.method for c in result.choice.candidates] == [
        "platt",
        "isotonic",
        "beta",
        "histogram",
    ]
    assert not any("left out" in w for w in warnings)
    hist = next(c for c in result.choice.candidates if c.method == "histogram")
    assert hist.cv_log_loss_bound == 0.0  # one score per cell: the rows exactly
    _, named, _ = _fit(
        tmp_path, "named", fit_summaries=(str(summary),), method=result.choice.chosen
    )
    assert saved["params"] == named["params"]
    _, rows, _ = _fit(tmp_path, "rows", fit=str(source), method="histogram", engine="memory")
    _, from_summary, _ = _fit(tmp_path, "h", fit_summaries=(str(summary),), method="histogram")
    assert from_summary["params"] == rows["params"]


@pytest.mark.parametrize(
    ("method", "strict", "warns"),
    [
        ("isotonic", False, True),
        ("isotonic", True, False),
        ("platt", False, False),
        ("beta", False, False),
    ],
)
def test_a_fit_on_a_summary_warns_of_an_auc_change_as_the_fit_on_rows_does(
    tmp_path: Path, method: str, strict: bool, warns: bool
) -> None:
    """A pooling map changes the AUC: the fit from a summary warns past twice the summary's
    AUC bound, with the AUC before and after, as ``--fit FILE`` warns on the rows; maps that
    keep the ranking do not warn."""
    source = _file(tmp_path)
    summary = _summarize(source, tmp_path / "s.parquet")
    options: dict[str, Any] = {"method": method} | ({"strict": True} if strict else {})
    _, _, from_summary = _fit(tmp_path, "summary", fit_summaries=(str(summary),), **options)
    _, _, from_rows = _fit(tmp_path, "rows", fit=str(source), **options)
    auc = [w for w in from_summary if "calibration changed the AUC by" in w]
    assert bool(auc) == warns
    assert bool([w for w in from_rows if "calibration changed the AUC by" in w]) == warns
    if warns:
        assert "(it pools scores into steps)" in auc[0] and " -> " in auc[0]
