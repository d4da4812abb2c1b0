"""``estimate-shift --backtest`` and ``--history``: their JSON payloads and tables.

Nothing here prints. Keys (documented in the README):

``batch_col``, ``label_delay``, ``reference_prevalence``, ``ci_level``, ``best_method`` (the
lowest ``mae``), ``methods`` (one object per method: ``method``, ``uses_labels``, ``mae``,
``max_abs_error``, ``coverage``, ``null`` without intervals) and ``batches`` (one object per
batch in order: ``batch``, ``rows``, ``true_prevalence``, ``n_history`` (labelled batches the
history blend learnt from), ``estimates`` (per method: ``prevalence``, ``ci_low``,
``ci_high``, ``error`` = estimate minus truth) and ``blend_weights`` (per candidate).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import RenderableType

from calib_cli.report.payloads import to_json_object, to_jsonable
from calib_cli.report.tables import fmt, fmt_count, row_table
from calib_cli.types import JsonObject, JsonValue

if TYPE_CHECKING:
    from calib_cli.workflows.estimate_shift import BacktestResult, BatchEstimate, HistoryResult

#: What each method's name means, for the tables.
METHOD_NOTES = {
    "mle": "label shift, maximum likelihood (auto)",
    "em": "label shift, EM on Platt posteriors",
    "pacc": "label shift, probabilistic adjusted count",
    "map": "label shift with a free positive shape",
    "pcc": "mean calibrated posterior (covariate shift)",
    "no_shift": "the reference rate",
    "rolling": "mean rate of the last 4 labelled batches",
    "history_blend": "blend fitted on the labelled batches",
}


def _best(result: BacktestResult) -> str:
    return min(result.methods, key=lambda m: m.mae).name


def backtest_payload(result: BacktestResult) -> JsonObject:
    """The backtest as one JSON object (keys in the module notes)."""
    batches: list[JsonValue] = []
    for t, value in enumerate(result.batches):
        truth = float(result.true_prevalence[t])
        estimates: JsonObject = {}
        for method in result.methods:
            estimate = float(method.prevalence[t])
            estimates[method.name] = {
                "prevalence": estimate,
                "ci_low": None if method.ci_low is None else float(method.ci_low[t]),
                "ci_high": None if method.ci_high is None else float(method.ci_high[t]),
                "error": estimate - truth,
            }
        batches.append(
            {
                "batch": to_jsonable(value),
                "rows": result.rows[t],
                "true_prevalence": truth,
                "n_history": int(result.n_history[t]),
                "estimates": estimates,
                "blend_weights": {
                    name: float(weight)
                    for name, weight in zip(result.candidates, result.blend_weights[t], strict=True)
                },
            }
        )
    methods: list[JsonValue] = [
        {
            "method": method.name,
            "uses_labels": method.uses_labels,
            "mae": method.mae,
            "max_abs_error": method.max_abs_error,
            "coverage": method.coverage,
        }
        for method in result.methods
    ]
    payload: JsonObject = {
        "batch_col": result.batch_col,
        "label_delay": result.label_delay,
        "reference_prevalence": result.reference_prevalence,
        "ci_level": result.ci_level,
        "best_method": _best(result),
        "methods": methods,
        "batches": batches,
    }
    return to_json_object(payload)  # NaN (no bootstrap) and infinities become null


def backtest_summary_table(result: BacktestResult) -> RenderableType:
    """Per method: what it is, whether it learns from earlier labels, MAE, largest error and
    interval coverage over the batches."""
    level = f"{result.ci_level:.0%} coverage"
    rows = [
        [
            method.name,
            METHOD_NOTES.get(method.name, ""),
            fmt(method.uses_labels),
            fmt(method.mae),
            fmt(method.max_abs_error),
            "—" if method.coverage is None else f"{method.coverage:.0%}",
        ]
        for method in result.methods
    ]
    best = _best(result)
    bold = frozenset(i for i, method in enumerate(result.methods) if method.name == best)
    title = (
        f"Backtest of {result.source}: {len(result.batches)} batches by {result.batch_col}, "
        f"labels {result.label_delay} batch{'es' if result.label_delay > 1 else ''} late"
    )
    return row_table(
        title,
        ["method", "what", "learns from labels", "MAE", "max |error|", level],
        rows,
        bold_rows=bold,
    )


def backtest_batch_table(result: BacktestResult) -> RenderableType:
    """Per batch: rows, true rate, each method's estimate and the history used."""
    headings = [result.batch_col, "rows", "true"]
    headings += [method.name for method in result.methods]
    headings.append("history")
    rows = []
    for t, value in enumerate(result.batches):
        cells = [str(value), fmt_count(result.rows[t]), fmt(float(result.true_prevalence[t]))]
        cells += [fmt(float(method.prevalence[t])) for method in result.methods]
        cells.append(str(int(result.n_history[t])))
        rows.append(cells)
    return row_table("Estimates per batch", headings, rows, labels=1)


def history_payload(history: HistoryResult, batches: Sequence[BatchEstimate]) -> JsonObject:
    """``history`` of estimate-shift's report with ``--history``: ``file``, ``label_delay``,
    ``past_batches``, ``past_rows``, ``ci_level``, ``candidates`` (each candidate's ``mae``
    on the past batches, each estimated as it would have been then), ``blend_mae`` (the
    blend's, likewise) and ``batches`` (per target batch: ``batch``, ``prevalence``,
    ``ci_low``, ``ci_high``, ``change`` = blend minus the label-shift estimate,
    ``n_history`` and the candidates' ``weights``)."""
    entries: list[JsonValue] = [
        {
            "batch": to_jsonable(batch.batch),
            "prevalence": float(history.prevalence[i]),
            "ci_low": float(history.ci_low[i]),
            "ci_high": float(history.ci_high[i]),
            "change": float(history.prevalence[i]) - batch.estimate.prevalence,
            "n_history": int(history.n_history[i]),
            "weights": {
                name: float(weight)
                for name, weight in zip(history.candidates, history.weights[i], strict=True)
            },
        }
        for i, batch in enumerate(batches)
    ]
    return to_json_object(
        {
            "file": history.source,
            "label_delay": history.label_delay,
            "past_batches": len(history.history_batches),
            "past_rows": history.history_rows,
            "ci_level": history.ci_level,
            "candidates": {
                name: {"mae": float(mae)}
                for name, mae in zip(history.candidates, history.candidate_mae, strict=True)
            },
            "blend_mae": history.blend_mae,
            "batches": entries,
        }
    )


def history_table(
    history: HistoryResult, batches: Sequence[BatchEstimate], *, batch_col: str | None
) -> RenderableType:
    """Per batch: the label-shift estimate, PCC, the blend learnt on the history with its
    interval, what the history changed, how much of it was used and its largest weight."""
    headings = [batch_col or "batch", "label shift", "PCC", "blend", "95% CI", "change"]
    headings += ["past batches", "largest weight"]
    rows = []
    for i, batch in enumerate(batches):
        top = int(history.weights[i].argmax())
        rows.append(
            [
                str(batch.batch),
                fmt(batch.estimate.prevalence),
                fmt(batch.estimate.pcc),
                fmt(float(history.prevalence[i])),
                f"{fmt(float(history.ci_low[i]))}–{fmt(float(history.ci_high[i]))}",
                f"{float(history.prevalence[i]) - batch.estimate.prevalence:+.4f}",
                str(int(history.n_history[i])),
                f"{history.candidates[top]} {history.weights[i, top]:.2f}",
            ]
        )
    title = (
        f"History blend: learnt on {len(history.history_batches)} labelled past batches of "
        f"{history.source} (blend MAE there {fmt(history.blend_mae)})"
    )
    return row_table(title, headings, rows, labels=1)
