"""``calib reliability``: calibration and discrimination figures per score column and group."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calib_cli import io
from calib_cli.core.decisions import gate_failures
from calib_cli.core.metrics import ReliabilitySummary, reliability_summary
from calib_cli.io import Table
from calib_cli.types import BinStrategy, GroupValue, InputFormat, OnInvalid, Warn
from calib_cli.workflows.common import (
    check_paths,
    finite_option,
    groups,
    ignore,
    read_scored_table,
)


@dataclass(frozen=True)
class ReliabilityRequest:
    """The options of a ``reliability`` run."""

    file: str
    score_cols: tuple[str, ...] = ("score",)
    label_col: str = "label"
    weight_col: str | None = None
    positive_label: str | None = None
    by: str | None = None
    n_bins: int = 10
    strategy: BinStrategy = "uniform"
    n_bootstrap: int = 0
    fail_above_ece: float | None = None
    fail_below_auc: float | None = None
    input_format: InputFormat | None = None
    on_invalid: OnInvalid = "error"
    report: str | None = None
    seed: int = 0


@dataclass(frozen=True)
class ReliabilityEntry:
    """The figures of one score column on all rows (``group`` None) or on one group."""

    score_column: str
    group: GroupValue
    heading: str  # the column, or "column\\nby=group" (the table shows the group below)
    summary: ReliabilitySummary

    @property
    def label(self) -> str:
        """The heading on one line (for gate messages)."""
        return self.heading.replace("\n", " (") + ")" if "\n" in self.heading else self.heading


@dataclass(frozen=True)
class ReliabilityResult:
    """Every entry (column x group) and the quality gates that failed."""

    source: str
    by: str | None
    n_bins: int
    strategy: BinStrategy
    seed: int
    entries: tuple[ReliabilityEntry, ...]
    gate_failures: tuple[str, ...]


def run_reliability(request: ReliabilityRequest, *, warn: Warn = ignore) -> ReliabilityResult:
    """Check the paths and options, read the file, and assess every column and group."""
    check_paths(inputs=[request.file], files=[request.report])
    finite_option(request.fail_above_ece, "--fail-above-ece")
    finite_option(request.fail_below_auc, "--fail-below-auc")
    table = read_scored_table(
        request.file,
        input_format=request.input_format,
        score_cols=request.score_cols,
        label_col=request.label_col,
        weight_col=request.weight_col,
        positive_label=request.positive_label,
        on_invalid=request.on_invalid,
        warn=warn,
    )
    return assess_table(table, request)


def assess_table(table: Table, request: ReliabilityRequest) -> ReliabilityResult:
    """The reliability figures of a table already read (``request.file`` is not read)."""
    y_true = table.labels(request.label_col, positive_label=request.positive_label)
    weights = table.weights(request.weight_col)
    by = request.by
    entries: list[ReliabilityEntry] = []
    for column in request.score_cols:
        scores = table.scores(column)
        for group, rows in groups(table, by, with_all_rows=True):
            where = table.name if group is None else f"{table.name} ({by}={group})"
            with io.naming(where):
                # a fresh generator per entry: a column's interval does not depend on which
                # other columns or groups are reported
                summary = reliability_summary(
                    y_true[rows],
                    scores[rows],
                    sample_weight=weights[rows],
                    n_bins=request.n_bins,
                    strategy=request.strategy,
                    n_bootstrap=request.n_bootstrap,
                    rng=np.random.default_rng(request.seed),
                )
            heading = column
            if by is not None:
                heading = f"{column}\n{by}={group if group is not None else 'all'}"
            entries.append(
                ReliabilityEntry(score_column=column, group=group, heading=heading, summary=summary)
            )
    failures = gate_failures(
        [(e.label, e.summary.ece, e.summary.auc) for e in entries],
        max_ece=request.fail_above_ece,
        min_auc=request.fail_below_auc,
    )
    return ReliabilityResult(
        source=table.name,
        by=by,
        n_bins=request.n_bins,
        strategy=request.strategy,
        seed=request.seed,
        entries=tuple(entries),
        gate_failures=failures,
    )
