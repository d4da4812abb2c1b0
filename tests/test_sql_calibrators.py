"""export-sql: every artifact kind as SQL, run in DuckDB, equals calib's own probabilities.

The reference is :func:`calib_cli.core.chain.apply_chain` (what ``calib recalibrate --model``
applies) on the same scores. Tolerance: 1e-12 relative (the prior step is calib's formula
rewritten without a division by zero, a few units in the last place apart; the others repeat
calib's operations), 1e-300 absolute (results in the subnormal range).
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_cli.artifacts import load_artifact, save_artifact, steps_artifact, steps_of
from calib_cli.core.beta import BetaParams
from calib_cli.core.chain import PriorParams, apply_chain
from calib_cli.core.histogram import HistogramParams
from calib_cli.core.isotonic import IsotonicParams
from calib_cli.core.platt import PlattParams
from calib_cli.core.selection import fit_calibrator
from calib_cli.errors import InputError, MissingInputError, OptionError
from calib_cli.sql.calibrators import calibrated_sql
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


def _check(steps: tuple[Any, ...], scores: np.ndarray, **kwargs: Any) -> None:
    kind = kwargs.pop("score_kind", "probability")
    expected = apply_chain(steps, scores, score_kind=kind, **kwargs)
    sql = calibrated_sql(steps, dialect_name="duckdb", score_kind=kind)
    extra = {}
    if "strata" in kwargs:
        names, codes = kwargs["strata"]
        extra = {steps[0].strata_col: pa.array([names[c] for c in codes])}
    got = _run_duckdb(sql, scores, extra)
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


def test_null_scores_give_null_for_every_kind() -> None:
    steps_list = [(_fitted(m),) for m in ("platt", "beta", "histogram", "isotonic")]
    steps_list.append((PriorParams(log_odds_shift=-1.0),))
    for steps in steps_list:
        sql = calibrated_sql(steps, dialect_name="duckdb")
        _CON.register("t", pa.table({"score": pa.array([0.3, None], pa.float64())}))
        rows = _CON.execute(f"SELECT {sql} FROM t").fetchall()
        assert rows[1][0] is None and math.isfinite(rows[0][0]), steps[0].kind


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
