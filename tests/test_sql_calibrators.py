"""export-sql: every artifact kind as SQL, run in DuckDB, equals calib's own probabilities.

The reference is :func:`calib_cli.core.chain.apply_chain` (what ``calib recalibrate --model``
applies) on the same scores. The prior correction of probabilities, histograms and isotonic
maps repeat calib's operations, so a prior step and the map after it are checked bit for bit
(a histogram's edges are calib's corrected scores: one unit in the last place moves a row to
the next bin). Elsewhere (the engine's EXP and LN in Platt, beta and a prior on logit
scores) the tolerance is 1e-12 relative, 1e-300 absolute (results in the subnormal range).
A score calib refuses (NaN, infinite, outside [0, 1] for probabilities) gives NULL.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_cli.artifacts import load_artifact, save_artifact, steps_artifact, steps_of
from calib_cli.core.beta import BetaParams
from calib_cli.core.chain import PriorParams, apply_chain, fit_chain
from calib_cli.core.histogram import HistogramParams
from calib_cli.core.isotonic import IsotonicParams
from calib_cli.core.platt import PlattParams
from calib_cli.core.selection import fit_calibrator
from calib_cli.errors import InputError, MissingInputError, OptionError, UsageError
from calib_cli.sql.calibrators import _least_nonzero, calibrated_sql
from calib_cli.sql.dialects import SQL_DIALECTS
from calib_cli.workflows.export_sql import ExportSqlRequest, run_export_sql
from tests.conftest import RunCalib

RTOL, ATOL = 1e-12, 1e-300
_CON = duckdb.connect()  # one in-process database for the module (queries read Arrow tables)

EDGE_SCORES = [0.0, 1e-300, 5e-324, 1e-12, 1e-9, 0.1, 0.25, 0.3, 0.5, 0.65, 0.7, 0.9,
               1 - 1e-9, 1 - 2**-53, 1.0]  # fmt: skip


def _scores(n: int = 300, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.beta(0.6, 2.0, n), np.array(EDGE_SCORES)])


def _run_duckdb(sql: str, scores: np.ndarray, extra: dict[str, Any] | None = None) -> np.ndarray:
    """``SELECT <sql> FROM t`` in DuckDB, t holding the scores (and any extra columns)."""
    _CON.register("t", pa.table({"score": pa.array(scores, pa.float64()), **(extra or {})}))
    rows = _CON.execute(f"SELECT {sql} AS calibrated FROM t").fetchall()
    return np.array([np.nan if r[0] is None else r[0] for r in rows], dtype=np.float64)


def _check(
    steps: tuple[Any, ...], scores: np.ndarray, *, exact: bool = False, **kwargs: Any
) -> None:
    """The SQL of ``steps`` on ``scores`` in DuckDB against apply_chain (``exact``: bit for bit)."""
    kind = kwargs.pop("score_kind", "probability")
    expected = apply_chain(steps, scores, score_kind=kind, **kwargs)
    sql = calibrated_sql(steps, dialect_name="duckdb", score_kind=kind)
    extra = {}
    if "strata" in kwargs:
        names, codes = kwargs["strata"]
        extra = {steps[0].strata_col: pa.array([names[c] for c in codes])}
    got = _run_duckdb(sql, scores, extra)
    if exact:
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


@functools.cache
def _fitted(method: str, **options: Any) -> Any:
    rng = np.random.default_rng(1)
    scores = rng.beta(0.8, 3.0, 400)
    labels = (rng.random(400) < scores**0.7).astype(np.float64)
    return fit_calibrator(method, scores, labels, **options)


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("platt", {}),
        ("beta", {}),
        ("histogram", {"n_bins": 15}),
        ("isotonic", {}),
        ("isotonic", {"strict": True, "eps": 1e-4}),
    ],
)
def test_each_fitted_calibrator_in_duckdb_equals_calib(
    method: str, options: dict[str, Any]
) -> None:
    _check((_fitted(method, **options),), _scores())


def test_platt_on_logit_and_raw_scores_with_extreme_margins() -> None:
    margins = np.array([-2000.0, -745.5, -709.9, -709.0, -30.0, 0.0, 1.5, 40.0, 709.0, 800.0])
    for kind in ("logit", "raw"):
        step = PlattParams(slope=1.3, intercept=-0.2, score_kind=kind, converged=True, n_iter=1,
                           separable=False)  # fmt: skip
        _check((step,), margins, score_kind=kind)


def test_prior_shifts_of_both_signs_zero_and_beyond_exp_range() -> None:
    scores = _scores(50)
    for shift in (math.log(0.01), -1e-3, 0.0, 2.5, 800.0, -800.0):
        _check((PriorParams(log_odds_shift=shift),), scores)
    _check((PriorParams(log_odds_shift=-1.5),), np.array([-40.0, 0.0, 3.0]), score_kind="logit")


def test_stratified_prior_uses_each_rows_stratum() -> None:
    scores = _scores(60)
    codes = np.arange(scores.size) % 3
    step = PriorParams(log_odds_shift=0.0, strata_col="region",
                       stratum_shifts={"eu": -2.0, "us": 0.5, "o'brien": -0.1})  # fmt: skip
    names = ("eu", "o'brien", "us")
    _check((step,), scores, strata=(names, codes))


def test_chains_in_both_orders() -> None:
    prior = PriorParams(log_odds_shift=math.log(0.1))
    iso = _fitted("isotonic")
    platt = _fitted("platt")
    scores = _scores(100)
    for steps in ((prior, iso), (iso, prior), (platt, prior), (prior, _fitted("beta"))):
        _check(steps, scores)


def _near_zero_cut(shifts: list[float]) -> np.ndarray:
    """Scores on both sides of each shift's least score calib does not correct to 0."""
    cuts = np.array([_least_nonzero(shift) for shift in shifts if shift != 0.0])
    return np.concatenate([cuts, np.nextafter(cuts, 0.0), np.nextafter(cuts, 1.0)])


def test_prior_correction_equals_calib_bit_for_bit() -> None:
    """The same operations in the same order as calib (the SQL computed p t / (p t + 1 - p),
    whose last bit differed from calib's for 34% to 84% of scores, by the shift)."""
    shifts = [math.log(0.2), math.log(0.01), -1e-3, 2.5, 0.0, -700.0, 700.0, -745.0, 745.0,
              800.0, -800.0]  # fmt: skip
    tiny = np.array([5e-324, 1e-320, 2.0**-1024, 2.0**-1022, 1e-300])
    scores = np.concatenate([_scores(2000), np.round(_scores(2000, seed=1), 2), tiny,
                             _near_zero_cut(shifts)])  # fmt: skip
    for shift in shifts:
        _check((PriorParams(log_odds_shift=shift),), scores, exact=True)


@settings(max_examples=20, deadline=None)
@given(shift=st.floats(-760.0, 760.0), seed=st.integers(0, 3))
def test_random_prior_shifts_in_duckdb_equal_calib_bit_for_bit(shift: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = np.concatenate([rng.random(200), rng.random(50) ** 40, EDGE_SCORES,
                             _near_zero_cut([shift])])  # fmt: skip
    _check((PriorParams(log_odds_shift=shift),), scores, exact=True)


@pytest.mark.parametrize("method", ["histogram", "isotonic"])
def test_prior_then_map_on_a_score_grid_equals_calib_bit_for_bit(method: str) -> None:
    """The map after a prior step reads calib's corrected scores: a histogram's edges and an
    isotonic map's knots are such values, and scores on a grid fall on them (before, 1,612 of
    20,000 rows of this histogram chain fell in a neighbouring bin, up to 0.064 away)."""
    rng = np.random.default_rng(0)
    scores = np.round(rng.beta(0.8, 3.0, 20_000), 2)
    labels = (rng.random(scores.size) < scores).astype(np.float64)
    codes = rng.integers(0, 3, scores.size)
    strata = (("a", "b", "c"), codes)
    by_stratum = PriorParams(log_odds_shift=0.0, strata_col="g",
                             stratum_shifts={"a": -1.0, "b": 0.4, "c": -2.3})  # fmt: skip
    options = {"histogram": {"n_bins": 20}}
    for prior in (PriorParams(log_odds_shift=math.log(0.2)), PriorParams(log_odds_shift=1.3),
                  by_stratum):  # fmt: skip
        kwargs: dict[str, Any] = {"strata": strata} if prior.strata_col else {}
        fit = fit_chain(scores, labels, method=method, prior=prior, options=options,
                        rng=np.random.default_rng(1), **kwargs)  # fmt: skip
        _check(fit.steps, scores, exact=True, **kwargs)


def test_prior_then_histogram_end_to_end_equals_calibs_output(
    tmp_path: Path, invoke_calib: RunCalib
) -> None:
    """The reviewer's case on the command line (in-process): fit, apply with --model,
    export-sql."""
    rng = np.random.default_rng(7)
    scores = np.round(rng.beta(0.8, 3.0, 20_000), 2)
    labels = (rng.random(scores.size) < scores).astype(np.int64)
    rows, model, out = tmp_path / "h.parquet", tmp_path / "m.json", tmp_path / "out.parquet"
    pl.DataFrame({"score": scores, "label": labels}).write_parquet(rows)
    fit = ["recalibrate", "--fit", str(rows), "--negative-rate", "0.2", "--method", "histogram",
           "--bins", "20", "--save-model", str(model), "-q"]  # fmt: skip
    assert invoke_calib(fit).returncode == 0
    assert invoke_calib(["recalibrate", str(rows), "--model", str(model), "-o", str(out),
                         "-q"]).returncode == 0  # fmt: skip
    sql = invoke_calib(["export-sql", str(model), "--dialect", "duckdb"]).stdout.decode()
    got = _CON.execute(f"SELECT {sql} FROM read_parquet('{rows}')").fetchnumpy()
    np.testing.assert_array_equal(next(iter(got.values())), pl.read_parquet(out)["calibrated"])


@pytest.mark.parametrize("method", ["prior", "platt"])
def test_a_calibrator_fitted_on_logits_is_exported_for_logits(
    tmp_path: Path, invoke_calib: RunCalib, method: str
) -> None:
    """A prior (or prior then Platt) fitted with --score-kind logit records the kind only in
    fitted_on; the SQL read probabilities: 36,983 of 40,000 rows NULL, the rest off by 0.8."""
    rng = np.random.default_rng(11)
    logits = rng.normal(-1.0, 2.0, 5_000)
    labels = (rng.random(logits.size) < 1 / (1 + np.exp(-logits))).astype(np.int64)
    rows, model, out = tmp_path / "l.parquet", tmp_path / "m.json", tmp_path / "out.parquet"
    pl.DataFrame({"lg": logits, "label": labels}).write_parquet(rows)
    source = ["--fit", str(rows)] if method == "platt" else [str(rows), "-o", str(out)]
    fit = ["recalibrate", *source, "--score-col", "lg", "--score-kind", "logit", "--negative-rate",
           "0.1", "--method", method, "--save-model", str(model), "-q"]  # fmt: skip
    assert invoke_calib(fit).returncode == 0
    apply = ["recalibrate", str(rows), "--model", str(model), "--score-col", "lg",
             "--score-kind", "logit", "-o", str(out), "-q"]  # fmt: skip
    assert invoke_calib(apply).returncode == 0
    done = invoke_calib(["export-sql", str(model), "--dialect", "duckdb", "--score-col", "lg"])
    if method == "prior":  # the kind came from fitted_on: said, as a column of probabilities
        assert "reads logit scores, as" in done.stderr.decode()  # would be all NULL
    got = _CON.execute(f"SELECT {done.stdout.decode()} FROM read_parquet('{rows}')").fetchnumpy()
    np.testing.assert_allclose(
        next(iter(got.values())), pl.read_parquet(out)["calibrated"], rtol=1e-14, atol=0
    )
    # applying it to the logits read as probabilities is allowed for a prior, but said
    probabilities = invoke_calib(["recalibrate", str(rows), "--model", str(model), "--score-col",
                                  "lg", "-o", str(out)])  # fmt: skip
    assert f"{model} was fitted on logit scores" in probabilities.stderr.decode()
    explicit = ["export-sql", str(model), "--dialect", "duckdb", "--score-kind", "probability"]
    assert invoke_calib(explicit).returncode == 0  # a prior first reads either kind


#: Scores calib refuses as probabilities, and the ones it refuses as logit or raw scores.
REFUSED = {"probability": [math.nan, math.inf, -math.inf, 1.5, -0.5, 1 + 2**-52, -5e-324],
           "logit": [math.nan, math.inf, -math.inf]}  # fmt: skip


def _refused_cases() -> list[Any]:
    prior = PriorParams(log_odds_shift=-1.0)
    cases = [((_fitted(m),), "probability") for m in ("platt", "beta", "histogram", "isotonic")]
    cases += [((prior,), "probability"), ((prior, _fitted("isotonic")), "probability"),
              ((_fitted("histogram"), prior), "probability"), ((prior,), "logit")]  # fmt: skip
    for kind in ("logit", "raw"):
        platt = PlattParams(slope=1.3, intercept=-0.2, score_kind=kind, converged=True,
                            n_iter=1, separable=False)  # fmt: skip
        cases += [((platt,), kind), ((platt, prior), kind)]
    return [pytest.param(steps, kind, id="-".join(s.kind for s in steps) + f"-{kind}")
            for steps, kind in cases]  # fmt: skip


@pytest.mark.parametrize(("steps", "kind"), _refused_cases())
def test_null_and_refused_scores_give_null_for_every_kind(
    steps: tuple[Any, ...], kind: str
) -> None:
    """NULL where calib refuses the score (before: isotonic NaN -> 0.999999, prior 1.5 ->
    -1.5, prior then isotonic 1.5 -> 1e-6), calib's probability for the others."""
    refused = REFUSED["probability" if kind == "probability" else "logit"]
    for value in refused:
        with pytest.raises(InputError):
            apply_chain(steps, np.array([value]), score_kind=kind)
    valid = [0.0, 1.0, 0.3, -0.0] + ([1.5, -0.5, -40.0] if kind != "probability" else [])
    sql = calibrated_sql(steps, dialect_name="duckdb", score_kind=kind)
    _CON.register("t", pa.table({"score": pa.array([*valid, *refused, None], pa.float64())}))
    got = [row[0] for row in _CON.execute(f"SELECT {sql} FROM t").fetchall()]
    assert got[len(valid) :] == [None] * (len(refused) + 1)
    np.testing.assert_allclose(got[: len(valid)], apply_chain(steps, np.array(valid),
                               score_kind=kind), rtol=RTOL, atol=ATOL)  # fmt: skip


# ------------------------------------------------------------------ Hypothesis


@st.composite
def isotonic_params(draw: st.DrawFn) -> IsotonicParams:
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.sampled_from([1e-15, 1e-9, 1e-3, 0.05, 0.3]), min_size=n, max_size=n))
    xs = np.cumsum(np.array(gaps)) / (sum(gaps) * draw(st.sampled_from([1.0, 1.0000001, 1.2])))
    xs = np.unique(xs)
    steps = draw(st.lists(st.sampled_from([0.0, 0.0, 1e-12, 1e-4, 0.2]), min_size=xs.size,
                          max_size=xs.size))  # fmt: skip
    ys = np.minimum(np.cumsum(np.array(steps)) + draw(st.sampled_from([0.0, 1e-7, 0.3])), 1.0)
    eps = draw(st.sampled_from([0.0, 1e-6, 0.01]))
    return IsotonicParams(x_knots=xs, y_knots=ys, eps=eps, strict=eps > 0 and draw(st.booleans()))


@settings(max_examples=15, deadline=None)
@given(params=isotonic_params(), seed=st.integers(0, 3))
def test_random_isotonic_maps_in_duckdb_equal_calib(params: IsotonicParams, seed: int) -> None:
    rng = np.random.default_rng(seed)
    knots = params.x_knots
    around = np.concatenate([knots, np.nextafter(knots, 0.0), np.nextafter(knots, 1.0)])
    scores = np.clip(np.concatenate([rng.random(50), around, EDGE_SCORES]), 0.0, 1.0)
    _check((params,), scores)


@settings(max_examples=10, deadline=None)
@given(
    inner=st.lists(st.floats(1e-300, 1.0, exclude_max=True), max_size=30, unique=True),
    data=st.data(),
)
def test_random_histograms_in_duckdb_equal_calib(inner: list[float], data: st.DataObject) -> None:
    edges = np.array([0.0, *sorted(inner), 1.0])
    rates = np.sort(np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=edges.size - 1,
                                                 max_size=edges.size - 1))))  # fmt: skip
    params = HistogramParams(edges=edges, rates=rates)
    scores = np.concatenate([edges, np.nextafter(edges[1:], 0.0), EDGE_SCORES])
    _check((params,), np.clip(scores, 0.0, 1.0))


@settings(max_examples=10, deadline=None)
@given(
    a=st.floats(-60.0, 60.0),
    b=st.floats(-60.0, 60.0),
    c=st.floats(0.0, 40.0),
    d=st.floats(0.0, 40.0),
)
def test_random_platt_and_beta_in_duckdb_equal_calib(
    a: float, b: float, c: float, d: float
) -> None:
    scores = _scores(40)
    platt = PlattParams(slope=a, intercept=b, score_kind="probability", converged=True,
                        n_iter=1, separable=False)  # fmt: skip
    _check((platt,), scores)
    _check((BetaParams(a=c, b=d, c=b, converged=True, n_iter=1),), scores)


# ------------------------------------------------------------------ other dialects, workflow


def _example_steps() -> list[tuple[Any, ...]]:
    prior = PriorParams(log_odds_shift=0.0, strata_col="region", stratum_shifts={"a": -1.0})
    return [
        (_fitted("platt"),),
        (_fitted("beta"),),
        (_fitted("histogram"),),
        (_fitted("isotonic"),),
        (prior, _fitted("isotonic", strict=True)),
    ]


@pytest.mark.parametrize("name", SQL_DIALECTS)
def test_every_dialect_parses_with_sqlglot(name: str) -> None:
    """BigQuery, Snowflake and Postgres are checked by parsing only: a SELECT of one
    expression, no unknown tokens, and the constants written as that dialect reads doubles."""
    read = {"spark": "spark", "duckdb": "duckdb", "bigquery": "bigquery",
            "snowflake": "snowflake", "postgres": "postgres"}[name]  # fmt: skip
    for steps in _example_steps():
        sql = calibrated_sql(steps, dialect_name=name)
        tree = sqlglot.parse_one(f"SELECT {sql} AS calibrated FROM t", read=read)
        assert isinstance(tree, sqlglot.exp.Select)
        assert len(tree.expressions) == 1
        constants = re.findall(r"(.)(-?\d+\.\d+e-?\d+)", sql)
        assert constants
        quoted = {before == "'" for before, _ in constants}
        assert quoted == ({True} if name in ("postgres", "snowflake") else {False})


@pytest.mark.parametrize("name", SQL_DIALECTS)
def test_every_dialect_guards_the_score_with_one_range_check(name: str) -> None:
    """The whole expression is ``CASE WHEN s >= low AND s <= high THEN ... END`` (no ELSE:
    NULL), [0, 1] for probabilities and the finite doubles for logit and raw scores."""
    raw = PlattParams(slope=1.3, intercept=-0.2, score_kind="raw", converged=True, n_iter=1,
                      separable=False)  # fmt: skip
    cases = [((PriorParams(log_odds_shift=2.0),), "probability", 0.0, 1.0),
             ((raw,), "raw", -1.7976931348623157e308, 1.7976931348623157e308)]  # fmt: skip
    for steps, kind, low, high in cases:
        sql = calibrated_sql(steps, dialect_name=name, score_kind=kind, score_col="p")
        tree = sqlglot.parse_one(f"SELECT {sql} AS calibrated FROM t", read=name)
        guard = tree.expressions[0].this
        assert isinstance(guard, sqlglot.exp.Case) and guard.args.get("default") is None
        (when,) = guard.args["ifs"]
        check = when.this.unnest()
        assert isinstance(check, sqlglot.exp.And)
        ge, le = check.left.unnest(), check.right.unnest()
        assert isinstance(ge, sqlglot.exp.GTE) and isinstance(le, sqlglot.exp.LTE)
        assert ge.this.name == le.this.name == "p"
        bounds = [float(re.findall(r"-?\d+\.\d+e[-+]?\d+", b.sql(dialect=name))[0])
                  for b in (ge.expression, le.expression)]  # fmt: skip
        assert bounds == [low, high]


def test_large_knot_sets_nest_logarithmically() -> None:
    rng = np.random.default_rng(3)
    xs = np.unique(rng.random(300))
    ys = np.sort(rng.random(xs.size))
    params = IsotonicParams(x_knots=xs, y_knots=ys, eps=1e-6, strict=False)
    sql = calibrated_sql((params,), dialect_name="duckdb")
    depth = max_depth = 0
    for token in sql.split():
        depth += token == "CASE"
        depth -= token == "END"
        max_depth = max(max_depth, depth)
    assert max_depth <= math.ceil(math.log2(xs.size)) + 2
    _check((params,), np.concatenate([rng.random(300), xs[::5], EDGE_SCORES]))


def test_workflow_writes_the_expression_of_a_saved_chain(tmp_path: Path) -> None:
    steps = (PriorParams(log_odds_shift=-2.0), _fitted("isotonic"))
    model = tmp_path / "model.json"
    save_artifact(str(model), steps_artifact(steps, {"file": "x", "rows": 1}))
    out = tmp_path / "expr.sql"
    result = run_export_sql(
        ExportSqlRequest(
            model=str(model), dialect="duckdb", score_expr="s * 1.0e0", output=str(out)
        )
    )
    assert result.kind == "chain" and result.n_steps == 2
    text = out.read_text()
    assert text == result.sql + "\n" and '"score"' not in text and "(s * 1.0e0)" in text
    scores = _scores(30)
    _CON.register("t", pa.table({"s": scores}))
    got = np.array([r[0] for r in _CON.execute(f"SELECT {text} FROM t").fetchall()])
    loaded = steps_of(load_artifact(str(model)))
    np.testing.assert_allclose(got, apply_chain(loaded, scores), rtol=RTOL, atol=ATOL)


def test_mismatched_score_kinds_are_refused_naming_the_step() -> None:
    with pytest.raises(InputError, match="isotonic calibration reads probabilities"):
        calibrated_sql((_fitted("isotonic"),), dialect_name="spark", score_kind="logit")
    with pytest.raises(InputError, match="fitted on probability scores, not raw"):
        calibrated_sql((_fitted("platt"),), dialect_name="spark", score_kind="raw")


def test_a_platt_model_exported_for_another_kind_is_a_usage_error(tmp_path: Path) -> None:
    """It exited 65 naming an internal field ("set score_kind to probability"), where
    recalibrate --model refuses the same mismatch with exit 2 naming --score-kind."""
    model = tmp_path / "platt.json"
    save_artifact(str(model), steps_artifact((_fitted("platt"),), {"file": "x", "rows": 1}))
    with pytest.raises(UsageError) as error:
        run_export_sql(ExportSqlRequest(model=str(model), dialect="spark", score_kind="logit"))
    assert str(error.value) == (
        f"{model} was fitted on probability scores, and --score-kind says logit: drop "
        "--score-kind, or give --score-kind probability"
    )


def test_the_installed_command_end_to_end(tmp_path: Path, run_calib: RunCalib) -> None:
    """calib export-sql: the SQL on stdout (nothing on stderr); usage and data exit codes."""
    steps = (_fitted("beta"), PriorParams(log_odds_shift=-1.0))
    model = tmp_path / "model.json"
    save_artifact(str(model), steps_artifact(steps, {"file": "x", "rows": 1}))
    done = run_calib(["export-sql", str(model), "--dialect", "duckdb", "--score-col", "p"])
    assert done.returncode == 0 and done.stderr == b""
    scores = _scores(20)
    _CON.register("t", pa.table({"p": scores}))
    got = [r[0] for r in _CON.execute(f"SELECT {done.stdout.decode()} FROM t").fetchall()]
    np.testing.assert_allclose(got, apply_chain(steps, scores), rtol=RTOL, atol=ATOL)
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "kind": "platt", "params": {}}')
    refused = run_calib(["export-sql", str(bad), "--dialect", "postgres"])
    assert refused.returncode == 65 and b"params.slope is missing" in refused.stderr
    with pytest.raises(MissingInputError, match=r"no\.json: no such file"):
        run_export_sql(ExportSqlRequest(model=str(tmp_path / "no.json"), dialect="spark"))
    with pytest.raises(OptionError, match="exclusive"):
        run_export_sql(
            ExportSqlRequest(model=str(model), dialect="spark", score_col="a", score_expr="b")
        )
    # an empty --score-col was read as the default column 'score'
    with pytest.raises(OptionError, match="--score-col is empty: give a column name"):
        run_export_sql(ExportSqlRequest(model=str(model), dialect="spark", score_col=""))
    with pytest.raises(OptionError, match="--score-expr is empty: give a SQL expression"):
        run_export_sql(ExportSqlRequest(model=str(model), dialect="spark", score_expr=" "))


def test_the_expit_guard_gives_one_where_the_formula_already_does() -> None:
    """Past z = 40 the SQL gives 1.0 without EXP: the formula's own value from z = 36.8, so no
    row changes, and EXP(-z) never turns subnormal (z > 708), a range error in Postgres."""
    from scipy.special import expit

    from calib_cli.sql.calibrators import _ONE_FROM

    z = np.linspace(36.8, 800.0, 5000)
    assert np.all(expit(z) == 1.0) and np.all(1.0 / (1.0 + np.exp(-z[z < 700])) == 1.0)
    assert 36.8 < _ONE_FROM < 708.0
