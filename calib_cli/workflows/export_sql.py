"""``calib export-sql``: a saved calibrator as one SQL expression, for a warehouse engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from calib_cli import io
from calib_cli.artifacts import STEP_KINDS, fitted_score_kind, load_artifact, steps_of
from calib_cli.errors import OptionError, UsageError
from calib_cli.sql.calibrators import calibrated_sql
from calib_cli.types import ScoreKind, Warn
from calib_cli.workflows.common import check_paths, ignore, refuse_shared_columns


@dataclass(frozen=True)
class ExportSqlRequest:
    """The options of an ``export-sql`` run (``score_kind`` None: the kind the calibrator was
    fitted on, :func:`calib_cli.artifacts.fitted_score_kind`)."""

    model: str
    dialect: str
    score_col: str | None = None
    score_expr: str | None = None
    score_kind: ScoreKind | None = None
    output: str = "-"


@dataclass(frozen=True)
class ExportSqlResult:
    """The emitted expression and what it was made from."""

    model: str
    kind: str
    n_steps: int
    dialect: str
    score_kind: ScoreKind
    sql: str


def run_export_sql(request: ExportSqlRequest, *, warn: Warn = ignore) -> ExportSqlResult:
    """Load and validate the calibrator, build its expression, write it (``-``: stdout)."""
    if request.score_col is not None and request.score_expr is not None:
        raise OptionError("--score-col and --score-expr are exclusive: give one")
    for option, value, what in (
        ("--score-col", request.score_col, "a column name"),
        ("--score-expr", request.score_expr, "a SQL expression"),
    ):
        if value is not None and not value.strip():  # '' was read as the default column
            raise OptionError(f"{option} is empty: give {what} or drop {option}")
    check_paths(inputs=[request.model], files=[request.output])
    artifact = load_artifact(request.model, kinds=("chain", *STEP_KINDS))
    steps = steps_of(artifact)
    fitted = cast(ScoreKind, fitted_score_kind(artifact))
    kind: ScoreKind = request.score_kind or fitted
    if steps[0].kind == "platt" and kind != fitted:
        # a Platt map is a function of the kind it was fitted on: another kind is wrong SQL
        raise UsageError(
            f"{request.model} was fitted on {fitted} scores, and --score-kind says {kind}: "
            f"drop --score-kind, or give --score-kind {fitted}"
        )
    if request.score_kind is None and kind != "probability" and steps[0].kind != "platt":
        warn(
            f"the expression reads {kind} scores, as {request.model} was fitted; a column of "
            "probabilities needs --score-kind probability (else every row is NULL)"
        )
    for step in steps:
        strata_col = getattr(step, "strata_col", None)
        if strata_col is not None:
            _warn_unchecked(request.dialect, "stratum column", strata_col, warn)
    sql = calibrated_sql(
        steps,
        dialect_name=request.dialect,
        score_col=request.score_col or "score",
        score_expr=request.score_expr,
        score_kind=kind,
    )
    io.write_text(request.output, sql + "\n")
    return ExportSqlResult(
        model=request.model,
        kind=artifact.kind,
        n_steps=len(steps),
        dialect=request.dialect,
        score_kind=kind,
        sql=sql,
    )


def _warn_unchecked(dialect_name: str, option: str, column: str, warn: Warn) -> None:
    """Warn where the dialect's SQL cannot write calib's text of a naming column."""
    from calib_cli.sql.names import unchecked_warning

    message = unchecked_warning(dialect_name, option, column)
    if message is not None:
        warn(message)


# ------------------------------------------------------------------ resample --emit-sql


@dataclass(frozen=True)
class ResampleSqlRequest:
    """The options of ``calib resample --emit-sql`` (those of ``resample`` that apply)."""

    dialect: str
    table: str
    key_col: str | None = None
    label_col: str = "label"
    positive_label: str | None = None
    seed: int = 0
    negative_rate: float | None = None
    positive_rate: float = 1.0
    target_positive_rate: float | None = None
    target_ratio: str | None = None
    strata_col: str | None = None
    rates_file: str | None = None
    weight_col_out: str | None = None
    output: str = "-"


def run_resample_sql(request: ResampleSqlRequest, *, warn: Warn = ignore) -> str:
    """Write the SELECT returning the rows ``calib resample`` keeps; return it."""
    from calib_cli.core.sampling import ClassRates, check_rate_options
    from calib_cli.sql.sampling import SamplingQuery, sampling_sql

    refuse_shared_columns(request)

    if request.key_col is None:
        raise OptionError(
            "--emit-sql needs --key-col: a table has no row order, so the row-number key "
            "calib hashes in files has no SQL equivalent"
        )
    if request.target_positive_rate is not None or request.target_ratio is not None:
        raise OptionError(
            "--target-positive-rate and --target-ratio need the class counts; with --emit-sql "
            "give --negative-rate (and --positive-rate) or --rates-file"
        )
    if request.rates_file is not None and request.strata_col is None:
        raise OptionError("--rates-file needs --strata-col")
    check_paths(inputs=[request.rates_file], files=[request.output])
    stratum_rates: dict[str, ClassRates] | None = None
    rates: ClassRates | None = None
    if request.rates_file is not None:
        from calib_cli.workflows.resample import read_rates_file

        stratum_rates = read_rates_file(request.rates_file)
    else:
        if request.negative_rate is None:
            raise OptionError("--emit-sql needs --negative-rate or --rates-file")
        check_rate_options(
            negative_rate=request.negative_rate,
            target_positive_rate=None,
            target_ratio=None,
            positive_rate=request.positive_rate,
        )
        rates = ClassRates(request.negative_rate, request.positive_rate)
    if stratum_rates is not None and request.strata_col is not None:
        _warn_unchecked(request.dialect, "--strata-col", request.strata_col, warn)
    sql = sampling_sql(
        SamplingQuery(
            table=request.table,
            key_col=request.key_col,
            label_col=request.label_col,
            positive_label=request.positive_label,
            seed=request.seed,
            rates=rates,
            strata_col=request.strata_col if stratum_rates is not None else None,
            stratum_rates=stratum_rates,
            weight_col_out=request.weight_col_out,
        ),
        dialect_name=request.dialect,
    )
    io.write_text(request.output, sql + "\n")
    return sql


# ------------------------------------------------------------------ summarize --emit-sql


@dataclass(frozen=True)
class SummarizeSqlRequest:
    """The options of ``calib summarize --emit-sql``."""

    dialect: str
    table: str
    score_col: str = "score"
    label_col: str = "label"
    weight_col: str | None = None
    by: str | None = None
    positive_label: str | None = None
    bins: int = 10
    #: ``--grid-bits``: mantissa bits of the score grid
    grid_bits: int = 12
    output: str = "-"


def run_summarize_sql(request: SummarizeSqlRequest, *, warn: Warn = ignore) -> str:
    """Write the GROUP BY whose result is the summary of the table's rows; return it."""
    import numpy as np

    from calib_cli.sql.summary import SummaryQuery, summary_sql

    refuse_shared_columns(request)

    if isinstance(request.bins, bool) or request.bins < 1:
        raise OptionError(f"--bins must be a positive integer, got {request.bins!r}")
    check_paths(inputs=[], files=[request.output])
    if request.by is not None:
        _warn_unchecked(request.dialect, "--by", request.by, warn)
    sql = summary_sql(
        SummaryQuery(
            table=request.table,
            score_col=request.score_col,
            label_col=request.label_col,
            weight_col=request.weight_col,
            by=request.by,
            positive_label=request.positive_label,
            bin_edges=tuple(float(e) for e in np.linspace(0.0, 1.0, request.bins + 1)),
            mantissa_bits=request.grid_bits,
        ),
        dialect_name=request.dialect,
    )
    io.write_text(request.output, sql + "\n")
    return sql
