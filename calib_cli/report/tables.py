"""Rich tables and the text reliability chart, built from the typed results.

Nothing here prints: the CLI owns the consoles (standard output for results, standard error
for diagnostics). Rendering returns values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from calib_cli.core.metrics import ReliabilitySummary
    from calib_cli.core.pca import PcaStrata
    from calib_cli.core.selection import MethodChoice
    from calib_cli.core.shift import ShiftEstimate
    from calib_cli.core.strata import RankingComparison, StratumSummary
    from calib_cli.workflows.estimate_shift import BatchEstimate
    from calib_cli.workflows.recalibrate import FileEffect
    from calib_cli.workflows.resample import ResampleResult
    from calib_cli.workflows.show import ShowResult

MISSING = "—"


# ---------------------------------------------------------------------------------- numbers


def fmt(value: float | None, digits: int = 4) -> str:
    """A figure for a table: ``—`` when undefined, scientific when tiny, else fixed.

    >>> fmt(0.123456), fmt(float("nan")), fmt(3.2e-7), fmt(12345)
    ('0.1235', '—', '3.200e-07', '12345')
    """
    if value is None:
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    number = float(value)
    if not math.isfinite(number):
        return MISSING
    if number != 0.0 and abs(number) < 10.0 ** (-(digits - 1)):
        return f"{number:.3e}"
    if abs(number) >= 1e6:
        return f"{number:.4g}"
    return f"{number:.{digits}f}"


def fmt_interval(interval: Sequence[float] | None, digits: int = 4) -> str:
    """``[lo, hi]`` or ``—``."""
    if interval is None or len(interval) != 2:
        return MISSING
    low, high = interval
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return MISSING
    return f"[{fmt(low, digits)}, {fmt(high, digits)}]"


def fmt_count(value: float) -> str:
    """A (possibly weighted) count: integer when whole, else two decimals."""
    number = float(value)
    if not math.isfinite(number):
        return MISSING
    return f"{number:,.0f}" if number == round(number) else f"{number:,.2f}"


# ------------------------------------------------------------------------------ reliability

# (label in the table, attribute, kind) — kind: "count", "figure", "interval"
RELIABILITY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("rows", "n", "count"),
    ("positives (weighted)", "positives", "count"),
    ("base rate", "base_rate", "figure"),
    ("mean score", "mean_score", "figure"),
    ("mean score - base rate", "calibration_in_the_large", "figure"),
    ("observed / expected", "observed_expected_ratio", "figure"),
    ("log loss", "log_loss", "figure"),
    ("Brier score", "brier", "figure"),
    ("  reliability", "brier_reliability", "figure"),
    ("  resolution", "brier_resolution", "figure"),
    ("  uncertainty", "brier_uncertainty", "figure"),
    ("ECE", "ece", "figure"),
    ("  ECE 95% CI", "ece_ci", "interval"),
    ("ECE debiased", "ece_debiased", "figure"),
    ("  debiased 95% CI", "ece_debiased_ci", "interval"),
    ("MCE", "mce", "figure"),
    ("AUC", "auc", "figure"),
    ("  AUC 95% CI (DeLong)", "auc_ci", "interval"),
    ("Gini", "gini", "figure"),
    ("average precision", "average_precision", "figure"),
    ("calibration intercept", "calibration_intercept", "figure"),
    ("  intercept 95% CI", "calibration_intercept_ci", "interval"),
    ("calibration slope", "calibration_slope", "figure"),
    ("  slope 95% CI", "calibration_slope_ci", "interval"),
    ("Hosmer-Lemeshow", "hosmer_lemeshow", "figure"),
    ("  HL p-value", "hosmer_lemeshow_pvalue", "figure"),
    ("Spiegelhalter z", "spiegelhalter_z", "figure"),
    ("  Spiegelhalter p-value", "spiegelhalter_pvalue", "figure"),
)


def _cell(summary: ReliabilitySummary, attribute: str, kind: str) -> str:
    value = getattr(summary, attribute, None)
    if kind == "count":
        return fmt_count(value) if value is not None else MISSING
    if kind == "interval":
        return fmt_interval(value)
    return fmt(value)


def reliability_summary_table(
    columns: Sequence[tuple[str, ReliabilitySummary]], *, title: str
) -> Table:
    """Figures as rows, one column per (score column, group), side by side. Interval rows
    that are undefined everywhere (no --bootstrap) are left out."""
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("figure", no_wrap=True)
    for heading, _ in columns:
        table.add_column(heading, justify="right", no_wrap=True)
    for label, attribute, kind in RELIABILITY_ROWS:
        cells = [_cell(summary, attribute, kind) for _, summary in columns]
        if kind == "interval" and all(cell == MISSING for cell in cells):
            continue
        table.add_row(label, *cells)
    return table


def _span(low: float, high: float, digits: int = 4) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return MISSING
    return f"{fmt(low, digits)}–{fmt(high, digits)}"


def reliability_bin_table(summary: ReliabilitySummary, *, title: str) -> Table:
    """The bin table: edges, weighted count, mean score, observed rate and its Wilson CI."""
    table = Table(title=title, title_justify="left", header_style="bold")
    for heading in ("bin", "count", "mean score", "observed", "95% CI (Wilson)"):
        table.add_column(heading, justify="right", no_wrap=True)
    for current in summary.bins:
        table.add_row(
            f"{current.lower:.4f}–{current.upper:.4f}",
            fmt_count(current.count),
            fmt(current.mean_score),
            fmt(current.observed_rate),
            _span(current.observed_ci_low, current.observed_ci_high),
        )
    return table


_NICE_LIMITS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)


def chart_limit(summary: ReliabilitySummary) -> float:
    """The axis maximum of the chart: the smallest round value above every bin's mean score
    and observed rate, so rare-event models do not crowd into one corner.

    >>> from types import SimpleNamespace as S
    >>> chart_limit(S(bins=[S(count=1, mean_score=0.03, observed_rate=0.041)]))
    0.05
    """
    top = 0.0
    for current in summary.bins:
        if current.count > 0:
            for value in (current.mean_score, current.observed_rate):
                if math.isfinite(value):
                    top = max(top, value)
    return next((limit for limit in _NICE_LIMITS if top <= limit), 1.0)


def reliability_chart(summary: ReliabilitySummary, *, width: int = 28, height: int = 12) -> Text:
    """A compact reliability diagram in text: observed rate (●) against mean score, with the
    diagonal of perfect calibration (·) and Wilson intervals (│). Both axes run from 0 to
    :func:`chart_limit`."""
    limit = chart_limit(summary)
    grid = [[" "] * width for _ in range(height)]

    def column_of(x: float) -> int:
        return min(width - 1, max(0, round(x / limit * (width - 1))))

    def row_of(y: float) -> int:
        return min(height - 1, max(0, height - 1 - round(y / limit * (height - 1))))

    for col in range(width):
        grid[row_of(col / (width - 1) * limit)][col] = "·"
    for current in summary.bins:
        if not (current.count > 0 and math.isfinite(current.observed_rate)):
            continue
        col = column_of(current.mean_score)
        low, high = current.observed_ci_low, current.observed_ci_high
        if math.isfinite(low) and math.isfinite(high):
            for row in range(row_of(min(high, limit)), row_of(low) + 1):
                if grid[row][col] in (" ", "·"):
                    grid[row][col] = "│"
        grid[row_of(current.observed_rate)][col] = "●"
    label = f"{limit:g}"
    pad = len(label)
    text = Text()
    for index, line in enumerate(grid):
        if index == 0:
            axis = f"{label} ┤"
        elif index == height - 1:
            axis = f"{'0':>{pad}} ┤"
        else:
            axis = " " * pad + " │"
        text.append(axis, style="dim")
        for char in line:
            style = "bold cyan" if char == "●" else ("cyan" if char == "│" else "dim")
            text.append(char, style=style)
        text.append("\n")
    text.append(" " * pad + " └" + "─" * width + "\n", style="dim")
    axis_label = f"mean score {label}"
    text.append(
        " " * pad + "  0" + " " * max(1, width - 1 - len(axis_label)) + axis_label + "\n",
        style="dim",
    )
    text.append(" " * pad + "  ● observed (│ 95% CI)  · ideal\n", style="dim")
    return text


def reliability_detail(summary: ReliabilitySummary, *, title: str) -> RenderableType:
    """The bin table with the chart beside it."""
    grid = Table.grid(padding=(0, 3))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_row(reliability_bin_table(summary, title=title), reliability_chart(summary))
    return grid


def stack(renderables: Sequence[RenderableType]) -> Group:
    """Renderables one below the other."""
    return Group(*renderables)


# -------------------------------------------------------------------------------- resample


# -------------------------------------------------------------------------------- resample


def _rate(value: float) -> str:
    return f"{float(value):.4g}"


def resample_table(result: ResampleResult) -> Table:
    """Rows, positives and base rates before (in) and after (out) sampling, with the rates."""
    table = Table(title="Sampling", title_justify="left", header_style="bold")
    for heading in (
        "stratum",
        "neg. rate",
        "pos. rate",
        "rows in",
        "rows out",
        "pos. in",
        "pos. out",
        "base rate in",
        "base rate out",
    ):
        table.add_column(heading, justify="right")
    summary = result.summary
    if summary.stratified:
        for s in summary.strata:
            table.add_row(
                f"{result.strata_col}={s.stratum}",
                _rate(s.rates.negative_rate),
                _rate(s.rates.positive_rate),
                fmt_count(s.before.rows),
                fmt_count(s.after.rows),
                fmt_count(s.before.positives),
                fmt_count(s.after.positives),
                fmt(s.before.base_rate),
                fmt(s.after.base_rate),
            )
    table.add_row(
        "all",
        "" if summary.stratified else _rate(summary.rates.negative_rate),
        "" if summary.stratified else _rate(summary.rates.positive_rate),
        fmt_count(summary.before.rows),
        fmt_count(summary.after.rows),
        fmt_count(summary.before.positives),
        fmt_count(summary.after.positives),
        fmt(summary.before.base_rate),
        fmt(summary.after.base_rate),
        style="bold",
    )
    return table


# ----------------------------------------------------------------------------- recalibrate


def calibration_effect_table(effect: FileEffect, *, title: str) -> Table:
    """Mean score and (with labels) log loss, Brier, ECE and AUC before and after."""
    table = Table(title=title, title_justify="left", header_style="bold")
    for heading in ("figure", "before", "after"):
        table.add_column(heading, justify="right")
    figures = effect.effect
    table.add_row("mean score", fmt(figures.mean_score_before), fmt(figures.mean_score_after))
    if effect.has_labels:
        table.add_row("base rate", fmt(figures.base_rate), fmt(figures.base_rate))
        before, after = figures.before, figures.after
        for label, key in (
            ("log loss", "log_loss"),
            ("Brier score", "brier"),
            ("ECE", "ece"),
            ("AUC", "auc"),
        ):
            table.add_row(
                label,
                fmt(None if before is None else getattr(before, key)),
                fmt(None if after is None else getattr(after, key)),
            )
    return table


def method_choice_table(choice: MethodChoice) -> Table:
    """The ``auto`` comparison: cross-validated log loss and Brier per method."""
    table = Table(
        title=f"auto: {choice.n_folds}-fold cross-validated comparison",
        title_justify="left",
        header_style="bold",
    )
    for heading in ("method", "CV log loss", "CV Brier", ""):
        table.add_column(heading, justify="right")
    for row in choice.candidates:
        mark = "chosen" if row.method == choice.chosen else ""
        table.add_row(
            row.method,
            fmt(row.cv_log_loss, 5),
            fmt(row.cv_brier, 5),
            mark,
            style="bold" if mark else None,
        )
    return table


# --------------------------------------------------------------------------- rerank-strata


def strata_table(summary: Sequence[StratumSummary], *, source: str) -> Table:
    """Per stratum: reference rows, positives, odds, within-stratum AUC, slope range."""
    table = Table(title=f"Strata (odds: {source})", title_justify="left", header_style="bold")
    for heading in (
        "stratum",
        "ref. rows",
        "positives",
        "odds",
        "AUC in stratum",
        "ROC slope min",
        "ROC slope max",
        "target rows",
    ):
        table.add_column(heading, justify="right", no_wrap=True)
    for row in summary:
        table.add_row(
            str(row.stratum),
            fmt_count(row.rows),
            fmt_count(row.positives),
            fmt(row.stratum_odds),
            fmt(row.auc),
            fmt(row.slope_min),
            fmt(row.slope_max),
            fmt_count(row.target_rows),
        )
    return table


def ranking_comparison_table(comparison: RankingComparison) -> Table:
    """AUC and TPR at fixed FPRs, raw pooled scores against the re-ranked order."""
    table = Table(title="Ranking on the labelled target", title_justify="left", header_style="bold")
    for heading in ("figure", "raw scores", "reranked"):
        table.add_column(heading, justify="right", no_wrap=True)
    table.add_row("AUC", fmt(comparison.auc_raw), fmt(comparison.auc_reranked))
    for fpr, raw, reranked in zip(
        comparison.fpr, comparison.tpr_raw, comparison.tpr_reranked, strict=True
    ):
        table.add_row(f"TPR at FPR {float(fpr):g}", fmt(raw), fmt(reranked))
    return table


def stratum_prevalence_table(prevalences: Mapping[str, ShiftEstimate]) -> Table:
    """Each stratum's positive rate estimated on the target, with its interval."""
    table = Table(
        title="Positive rate per stratum, estimated on the target",
        title_justify="left",
        header_style="bold",
    )
    for heading in ("stratum", "estimate", "95% CI", "reference", "method"):
        table.add_column(heading, justify="right", no_wrap=True)
    for stratum, row in prevalences.items():
        table.add_row(
            str(stratum),
            fmt(row.prevalence),
            _span(row.ci_low, row.ci_high),
            fmt(row.reference_prevalence),
            str(row.method),
        )
    return table


def pca_note(pca: PcaStrata) -> str:
    """One line on Algorithm 2's strata: the component, its variance share, the label rates."""
    rates = ", ".join(
        f"{k}: {v:.4f}" if v is not None and math.isfinite(v) else f"{k}: —"
        for k, v in pca.reference_label_rate.items()
    )
    return (
        f"first principal component of {', '.join(pca.features)}: explains "
        f"{pca.explained_variance_ratio:.1%} of the variance; {pca.n_strata} "
        f"strata (pca_stratum), reference label rates {rates}"
    )


# -------------------------------------------------------------------------- estimate-shift


def _signed(value: float) -> str:
    """A z-like figure with its sign and one decimal, ``—`` when undefined.

    >>> _signed(-3.46), _signed(0.04), _signed(float("nan"))
    ('-3.5', '+0.0', '—')
    """
    return f"{value:+.1f}" if math.isfinite(value) else MISSING


def shift_table(batches: Sequence[BatchEstimate], *, batch_col: str | None, source: str) -> Table:
    """Per batch: rows, estimated prevalence and interval, method, PCC and the disagreement
    (``prevalence - pcc`` in standard errors), diagnostics (and the true rate and error when
    the target has labels)."""
    table = Table(title=f"Positive rate of {source}", title_justify="left", header_style="bold")
    has_truth = any(b.true_prevalence is not None for b in batches)
    headings = [batch_col] if batch_col is not None else []
    headings += ["rows", "estimate", "95% CI", "ref. rate", "method", "PCC", "disagr."]
    headings += ["conv.", "ref. AUC", "fit p"]
    if has_truth:
        headings += ["true", "error"]
    for heading in headings:
        table.add_column(heading, justify="right", no_wrap=True)
    for batch in batches:
        estimate = batch.estimate
        cells = [str(batch.batch)] if batch_col is not None else []
        cells += [
            fmt_count(estimate.n),
            fmt(estimate.prevalence),
            _span(estimate.ci_low, estimate.ci_high),
            fmt(estimate.reference_prevalence),
            str(estimate.method),
            fmt(estimate.pcc),
            _signed(estimate.disagreement),
            fmt(estimate.converged),
            fmt(estimate.reference_auc),
            fmt(estimate.fit_pvalue),
        ]
        if has_truth:
            cells += [fmt(batch.true_prevalence), fmt(batch.error)]
        table.add_row(*cells)
    return table


def decision_table(
    batches: Sequence[BatchEstimate], *, batch_col: str | None, threshold: float
) -> Table:
    """Expected (and realised) cost per row of the static and the re-estimated decisions."""
    table = Table(
        title=f"Decisions at the Bayes threshold {threshold:.4g}: share of rows flagged, cost "
        "per row (static = reference prior)",
        title_justify="left",
        header_style="bold",
    )
    has_truth = any(
        b.decision is not None and b.decision.realised_cost_static is not None for b in batches
    )
    headings = [batch_col] if batch_col is not None else []
    headings += ["flagged: static", "re-est.", "expected cost: static", "re-est."]
    if has_truth:
        headings += ["actual cost: static", "re-est."]
    for heading in headings:
        table.add_column(heading, justify="right", no_wrap=True)
    for batch in batches:
        decision = batch.decision
        cells = [str(batch.batch)] if batch_col is not None else []
        if decision is None:
            cells += [MISSING] * (6 if has_truth else 4)
        else:
            cells += [
                fmt(decision.flagged_static),
                fmt(decision.flagged_shifted),
                fmt(decision.expected_cost_static),
                fmt(decision.expected_cost_shifted),
            ]
            if has_truth:
                cells += [
                    fmt(decision.realised_cost_static),
                    fmt(decision.realised_cost_shifted),
                ]
        table.add_row(*cells)
    return table


# ------------------------------------------------------------------------------------ show


def _detail(value: object) -> str:
    """A fitted number or setting in short: figures to four significant digits, pairs as
    ``[lo, hi]``, mappings as ``key: value`` pairs.

    >>> _detail(0.123456), _detail([0.5, 2]), _detail({"A": 0.25}), _detail(True)
    ('0.1235', '[0.5, 2]', 'A: 0.25', 'yes')
    """
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_detail(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_detail(v)}" for k, v in value.items())
    return str(value)


def show_table(result: ShowResult) -> Table:
    """``calib show``: kind, steps with their fitted numbers, and provenance."""
    artifact = result.artifact
    table = Table(
        title=f"{result.path}: {artifact.kind} (schema {artifact.schema_version}, "
        f"calib {artifact.calib_version or MISSING})",
        title_justify="left",
        show_header=False,
    )
    table.add_column("", style="bold")
    table.add_column("")
    for index, step in enumerate(result.steps, start=1):
        name = f"step {index}: {step.kind}" if len(result.steps) > 1 else step.kind
        details = "\n".join(f"{k} {_detail(v)}" for k, v in step.details.items())
        table.add_row(name, details or MISSING, end_section=True)
    for key, value in result.provenance.items():
        if isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if v is not None}
        table.add_row(key.replace("_", " "), _detail(value))
    return table
