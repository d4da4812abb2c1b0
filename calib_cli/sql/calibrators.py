"""Saved calibrators as one SQL expression: the calibrated probability of every row.

Each step of an artifact (:func:`calib_cli.artifacts.steps_of`) becomes an expression of the
previous step's expression, so a chain is one nested expression, the first step reading the
score column (or the user's score expression) and each later step the probability before it.
The formulas are those of ``calib recalibrate --model`` (:func:`calib_cli.core.chain.apply_chain`):

* prior, probability scores, shift :math:`\\ell \\ne 0`, :math:`t = e^{-|\\ell|}` (calib's
  own ``exp``, computed here, a constant): calib's :math:`1 / (1 + q)` with
  :math:`q = (1 - p) / (p t)` for :math:`\\ell < 0` and :math:`q = (1 - p) t / p` for
  :math:`\\ell > 0`, the same operations in the same order, so the same double (a histogram's
  edges and an isotonic map's knots after a prior step are calib's corrected values, and a
  last-bit difference would move rows across them); 0 below the least score :math:`p_0` whose
  correction calib does not make 0 (below it :math:`q` overflows, and an engine would divide
  by zero or overflow, errors in Spark's ANSI mode and in Postgres); per stratum, a ``CASE``
  on the stratum column's text as calib writes it (:mod:`calib_cli.sql.names`; rows of a
  stratum the artifact does not know get NULL); logit
  scores: :math:`\\operatorname{expit}(z + \\ell)`;
* Platt: :math:`\\operatorname{expit}(b + a x)` with :math:`x = \\ln(c / (1 - c))`,
  :math:`c = \\operatorname{clip}(p, 10^{-12}, 1 - 10^{-12})` for probability scores, else
  :math:`x` the score;
* beta: :math:`\\operatorname{expit}(c + a \\ln q - b \\ln(1 - q))`, :math:`q` clipped alike;
* histogram: the rate of the bin holding the score, bins found by a balanced ``CASE`` on the
  inner edges (a bin is ``[e_i, e_{i+1})``, the last one closed), depth
  :math:`\\lceil \\log_2 k \\rceil` for :math:`k` bins;
* isotonic: NumPy's ``interp`` through the knots, constant outside them, then clipped to
  ``[eps, 1 - eps]``: a balanced ``CASE`` finds the knot interval in
  :math:`\\lceil \\log_2 k \\rceil` comparisons and the leaf is
  :math:`s_j (p - x_j) + y_j` with NumPy's slope :math:`s_j = (y_{j+1} - y_j) / (x_{j+1} -
  x_j)` computed here, so the engine repeats NumPy's two operations; a flat run is its
  constant, and only leaves whose values reach past ``eps`` or ``1 - eps`` carry the clip.

:math:`\\operatorname{expit}(z) = 1 / (1 + e^{-z})` as SciPy computes it; where :math:`|z|`
can exceed 700 (logit or raw scores, or extreme fitted parameters) a ``CASE`` gives 0 where
:math:`e^{-z}` would overflow (SciPy's result there) and 1 past :math:`z > 40` (where the
formula gives 1.0 already, before :math:`e^{-z}` turns subnormal past 708, a range error in
Postgres). A NULL score gives a NULL probability, and so does a
score calib refuses (:func:`calib_cli.core.checks.check_scores`: NaN, infinite, or outside
``[0, 1]`` for probability scores): the whole expression is
``CASE WHEN s >= low AND s <= high THEN ... END``, with ``[low, high]`` = ``[0, 1]``, or the
finite doubles for logit and raw scores. A NaN fails one of the two comparisons whether the
engine orders it above every number (DuckDB, Spark, Snowflake, Postgres), below, or makes
every comparison with it false; an infinity fails one of them, and NULL makes both NULL.

Why a nested ``CASE`` and not a knots table: the expression stays one expression that any
``SELECT`` (or ``UPDATE``, or a view) can use with no table to create, ship or join; its depth
is logarithmic in the knots, so a row costs :math:`O(\\log k)` comparisons; and an ASOF or
range join is spelled differently in every engine (BigQuery and Postgres have no ASOF join).
Its text grows linearly with the knots (about 100 bytes per knot), which every engine parses
quickly for the thousands of knots an isotonic fit keeps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from calib_cli.core import elementary as el
from calib_cli.core.prior import apply_prior_shift
from calib_cli.errors import InputError
from calib_cli.sql.dialects import dialect
from calib_cli.sql.tree import (
    Binary,
    Case,
    Column,
    Double,
    GroupText,
    IsNull,
    Let,
    Node,
    Null,
    Raw,
    Text,
    Var,
    add,
    call,
    case,
    clip,
    div,
    if_else,
    mul,
    render,
    sub,
)
from calib_cli.types import FloatArray, ScoreKind

__all__ = ["calibrated_expr", "calibrated_sql", "score_node"]

#: The clip of probability scores before a logit or logarithm (Platt's and beta's default eps).
FEATURE_EPS = 1e-12
#: Past this |z|, expit needs its guarded form (EXP overflows near 709.78).
_SAFE_Z = 700.0
#: exp(-z) overflows for z below this (log of the largest double); SciPy's expit is then 0.
_EXP_OVERFLOW = -math.log(np.finfo(np.float64).max)
_LOGIT_BOUND = math.log((1.0 - FEATURE_EPS) / FEATURE_EPS)
#: The largest finite double: logit and raw scores up to it in size are accepted.
_LARGEST = float(np.finfo(np.float64).max)


def score_node(score_col: str | None, score_expr: str | None) -> Node:
    """The input of the first step: a column, or the user's SQL expression."""
    if score_expr is not None:
        if not score_expr.strip():
            raise InputError("score_expr is empty; give a SQL expression or a score column")
        return Raw(score_expr.strip())
    return Column(score_col or "score")


def _accepted(score: Node, kind: ScoreKind) -> Node:
    """Whether calib accepts ``score`` as a score of ``kind``: false for NaN, infinities and
    (probabilities) values outside [0, 1], NULL for NULL (module docstring)."""
    low, high = (0.0, 1.0) if kind == "probability" else (-_LARGEST, _LARGEST)
    return Binary("AND", Binary(">=", score, Double(low)), Binary("<=", score, Double(high)))


#: From this z on, ``1 / (1 + exp(-z))`` is 1.0 exactly (``exp(-z)`` is below half the
#: spacing of the doubles above 1 from z = 36.8): the guard gives it there, before ``exp(-z)``
#: turns subnormal (z > 708), which glibc flags as a range error and Postgres raises.
_ONE_FROM = 40.0


def _expit(z: Node, bound: float) -> Node:
    """SciPy's ``expit(z) = 1 / (1 + exp(-z))``; guarded when ``|z|`` may pass 700."""
    plain = div(Double(1.0), add(Double(1.0), call("EXP", Binary("-", Double(0.0), z))))
    if bound <= _SAFE_Z:
        return plain
    return case(
        [
            (Binary("<", z, Double(_EXP_OVERFLOW)), Double(0.0)),
            (Binary(">", z, Double(_ONE_FROM)), Double(1.0)),
        ],
        plain,
    )


def _logit(p: Node) -> Node:
    return call("LN", div(p, sub(Double(1.0), p)))


def _prior(step: Any, p: Node, kind: ScoreKind) -> Node:
    if step.strata_col is None:
        return _prior_one(float(step.log_odds_shift), p, kind)
    # the stratum's text (calib's, whatever the column's type) written once, read per stratum
    stratum = Var("_calib_stratum")
    whens = [
        (Binary("=", stratum, Text(name)), _prior_one(float(shift), p, kind))
        for name, shift in sorted(step.stratum_shifts.items())
    ]
    text = GroupText(Column(step.strata_col), step.strata_col)
    return Let("_calib_stratum", text, Case(tuple(whens), Null()))


def _prior_one(shift: float, p: Node, kind: ScoreKind) -> Node:
    if kind == "logit":
        return _expit(add(p, Double(shift)), math.inf)
    if shift == 0.0:
        return p
    t = float(el.exp(-abs(shift)))  # apply_prior_shift's t, bit for bit (math.exp may differ)
    if t == 0.0:  # |shift| > 745: every score strictly inside (0, 1) goes to 0 (or 1)
        inside = Double(0.0) if shift < 0 else Double(1.0)
        return case(
            [(Binary("=", p, Double(0.0)), Double(0.0))],
            if_else(Binary("=", p, Double(1.0)), Double(1.0), inside),
        )
    # calib's q, operation for operation: (1 - p) / (p t) downwards, (1 - p) t / p upwards
    complement = sub(Double(1.0), p)
    q = div(complement, mul(p, Double(t))) if shift < 0 else div(mul(complement, Double(t)), p)
    corrected = div(Double(1.0), add(Double(1.0), q))
    return if_else(Binary("<", p, Double(_least_nonzero(shift))), Double(0.0), corrected)


def _least_nonzero(shift: float) -> float:
    """The least probability whose correction by ``shift`` calib does not make 0.

    Below it calib's ``q`` overflows (or ``p t`` underflows to 0) and ``1 / (1 + q)`` is 0;
    at and above it every operation of the formula is finite, so no engine divides by zero
    (an error in Spark's ANSI mode and in Postgres) or overflows (an error in Postgres). The
    correction never decreases as ``p`` grows, and neither do the bit patterns of the
    doubles in [0, 1], so a bisection over them finds it from calib's own function.

    >>> _least_nonzero(-2.0)
    4.1102988911934493e-308
    """

    def as_double(bits: int) -> FloatArray:
        return np.array([bits], dtype=np.int64).view(np.float64)

    low, high = 0, int(np.float64(1.0).view(np.int64))  # 0 is corrected to 0, and 1 to 1
    while high - low > 1:
        mid = (low + high) // 2
        if apply_prior_shift(as_double(mid), shift)[0] > 0.0:
            high = mid
        else:
            low = mid
    return float(as_double(high)[0])


def _platt(step: Any, p: Node, kind: ScoreKind) -> Node:
    if kind != step.score_kind:
        raise InputError(
            f"this Platt calibrator was fitted on {step.score_kind} scores, not {kind} scores "
            f"(--score-kind {step.score_kind})"
        )
    slope, intercept = float(step.slope), float(step.intercept)
    if kind == "probability":
        x = _logit(clip(p, FEATURE_EPS, 1.0 - FEATURE_EPS))
        bound = abs(intercept) + abs(slope) * _LOGIT_BOUND
    else:
        x = p
        bound = math.inf
    return _expit(add(Double(intercept), mul(Double(slope), x)), bound)


def _beta(step: Any, p: Node) -> Node:
    q = clip(p, FEATURE_EPS, 1.0 - FEATURE_EPS)
    a, b, c = float(step.a), float(step.b), float(step.c)
    log_q = call("LN", q)
    minus_log_complement = Binary("-", Double(0.0), call("LN", sub(Double(1.0), q)))
    z = add(add(Double(c), mul(Double(a), log_q)), mul(Double(b), minus_log_complement))
    bound = abs(c) + (abs(a) + abs(b)) * -math.log(FEATURE_EPS)
    return _expit(z, bound)


def _histogram(step: Any, p: Node) -> Node:
    inner = [float(e) for e in np.asarray(step.edges, dtype=np.float64)[1:-1]]
    rates = [float(r) for r in np.asarray(step.rates, dtype=np.float64)]

    def node(lo: int, hi: int) -> Node:
        if lo == hi:
            return Double(rates[lo])
        mid = (lo + hi + 1) // 2  # bins >= mid hold the scores >= inner[mid - 1]
        return if_else(Binary("<", p, Double(inner[mid - 1])), node(lo, mid - 1), node(mid, hi))

    return if_else(IsNull(p), Null(), node(0, len(rates) - 1))


def _isotonic(step: Any, p: Node) -> Node:
    xs = [float(v) for v in np.asarray(step.x_knots, dtype=np.float64)]
    ys = [float(v) for v in np.asarray(step.y_knots, dtype=np.float64)]
    eps = float(step.eps)
    low, high = (eps, 1.0 - eps) if eps > 0.0 else (-math.inf, math.inf)

    def clipped(value: float) -> Node:
        return Double(min(max(value, low), high))

    def leaf(j: int) -> Node:
        if ys[j] == ys[j + 1]:
            return clipped(ys[j])
        slope = (ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j])
        value = add(mul(Double(slope), sub(p, Double(xs[j]))), Double(ys[j]))
        if eps > 0.0 and (ys[j] <= low or ys[j + 1] >= high):
            return clip(value, low, high)
        return value

    def node(lo: int, hi: int) -> Node:
        if lo == hi:
            return leaf(lo)
        mid = (lo + hi + 1) // 2  # intervals >= mid hold the scores >= xs[mid]
        return if_else(Binary("<", p, Double(xs[mid])), node(lo, mid - 1), node(mid, hi))

    if len(xs) == 1:
        return if_else(IsNull(p), Null(), clipped(ys[0]))
    return case(
        [
            (IsNull(p), Null()),
            (Binary("<=", p, Double(xs[0])), clipped(ys[0])),
            (Binary(">=", p, Double(xs[-1])), clipped(ys[-1])),
        ],
        node(0, len(xs) - 2),
    )


def calibrated_expr(
    steps: Sequence[Any], score: Node, *, score_kind: ScoreKind = "probability"
) -> Node:
    """The expression tree of a chain of steps applied to ``score`` (module docstring).

    ``steps`` are the step dataclasses of :func:`calib_cli.artifacts.steps_of`; the first
    reads ``score_kind`` scores, the rest probabilities, as in
    :func:`calib_cli.core.chain.apply_chain`. A score calib would refuse gives NULL.
    """
    if not steps:
        raise InputError("a calibration chain needs at least one step")
    current, kind = score, score_kind
    bound: str | None = None  # the name the step's input is bound to (after a stratified prior)
    for index, step in enumerate(steps):
        outer = current
        if bound is not None:
            current = Var(bound)
        if step.kind == "prior":
            if kind == "raw":
                raise InputError(
                    "raw scores are not probabilities or log-odds, so a prior shift is "
                    "undefined; put a Platt step first, or read logits (--score-kind logit)"
                )
            current = _prior(step, current, kind)
        elif step.kind == "platt":
            current = _platt(step, current, kind)
        elif kind != "probability":
            raise InputError(
                f"{step.kind} calibration reads probabilities in [0, 1], not {kind} scores; "
                "put a Platt or prior step first"
            )
        elif step.kind == "beta":
            current = _beta(step, current)
        elif step.kind == "histogram":
            current = _histogram(step, current)
        elif step.kind == "isotonic":
            current = _isotonic(step, current)
        else:
            raise InputError(f"not a calibration step: {step.kind!r}")
        if bound is not None:
            current = Let(bound, outer, current)
        # a stratified prior's output holds the stratum's text: written once, where the next
        # step reads its input many times (every knot of an isotonic map)
        stratified = step.kind == "prior" and step.strata_col is not None
        bound = f"_calib_p{index}" if stratified else None
        kind = "probability"
    return case([(_accepted(score, score_kind), current)])


def calibrated_sql(
    steps: Sequence[Any],
    *,
    dialect_name: str,
    score_col: str | None = "score",
    score_expr: str | None = None,
    score_kind: ScoreKind = "probability",
) -> str:
    """The SQL text of :func:`calibrated_expr` in one dialect.

    Examples
    --------
    >>> from calib_cli.core.platt import PlattParams
    >>> step = PlattParams(slope=2.0, intercept=-1.0, score_kind="logit", converged=True,
    ...                    n_iter=3, separable=False)
    >>> sql = calibrated_sql([step], dialect_name="duckdb", score_kind="logit")
    >>> print(sql.split(" THEN ")[0])
    CASE WHEN (("score" >= (-1.7976931348623157e+308)) AND ("score" <= 1.7976931348623157e+308))
    """
    node = calibrated_expr(steps, score_node(score_col, score_expr), score_kind=score_kind)
    return render(node, dialect(dialect_name))
