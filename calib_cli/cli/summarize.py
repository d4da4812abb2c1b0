"""``calib summarize``: options -> :mod:`calib_cli.workflows.summarize` -> summary file(s)."""

from __future__ import annotations

from typing import Annotated, cast

import typer

from calib_cli.cli.export_sql import EmitSqlOpt, SqlDialectOpt, TableOpt, sql_target
from calib_cli.cli.options import (
    INPUT_HELP,
    DebugOpt,
    DecimalCommaOpt,
    InputFormatOpt,
    LabelColOpt,
    MaxInvalidOpt,
    NoColorOpt,
    OnInvalidOpt,
    PositiveLabelOpt,
    QuietOpt,
    ReportOpt,
    SeparatorOpt,
    WeightColOpt,
    WeightKindOpt,
    chosen,
    chosen_or_none,
    csv_dialect,
    in_range,
    max_invalid,
    weight_kind,
)
from calib_cli.cli.session import command_session, emit_report
from calib_cli.errors import UsageError
from calib_cli.types import InputFormat, OnInvalid

EPILOG = (
    "Example: calib summarize scores-2026-11-23.parquet --by segment "
    "-o summaries/2026-11-23.parquet   (then: calib reliability --from-summary summaries/*.parquet)"
)


def summarize(
    files: Annotated[
        list[str] | None,
        typer.Argument(help=INPUT_HELP + " Several files are merged.", show_default=False),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            help="Summary file: Parquet (.parquet, .pq) or JSON (.json); '-' for stdout (Parquet)."
            " With --emit-sql: the SQL's file (default stdout).",
            show_default=False,
        ),
    ] = None,
    score_col: Annotated[
        list[str] | None,
        typer.Option(
            "--score-col",
            help="Column of probabilities; repeat for one summary file per column.",
            show_default="score",
        ),
    ] = None,
    label_col: LabelColOpt = "label",
    weight_col: WeightColOpt = None,
    weight_kind_choice: WeightKindOpt = None,
    positive_label: PositiveLabelOpt = None,
    by: Annotated[
        str | None,
        typer.Option("--by", help="Keep each value of this column apart (reliability --by)."),
    ] = None,
    bins: Annotated[
        int,
        typer.Option("--bins", **in_range("Reliability bins kept exact.", low=1, high=10_000)),
    ] = 10,
    grid_bits: Annotated[
        int,
        typer.Option(
            "--grid-bits",
            **in_range(None, low=12, high=30),
            help="Mantissa bits of the score grid, 12 to 30 (20 for recalibrate "
            "--fit-summary --method histogram; each bit can double the keys).",
        ),
    ] = 12,
    input_format: InputFormatOpt = None,
    separator: SeparatorOpt = None,
    decimal_comma: DecimalCommaOpt = False,
    on_invalid: OnInvalidOpt = "error",
    max_invalid_rows: MaxInvalidOpt = None,
    report: ReportOpt = None,
    emit_sql: EmitSqlOpt = False,
    sql_dialect: SqlDialectOpt = None,
    table: TableOpt = None,
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Summarise scored rows into a small mergeable file that reliability reads (--from-summary)."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        kind = weight_kind(weight_kind_choice, weight_col) or "frequency"
        target = sql_target(
            emit_sql,
            sql_dialect,
            table,
            inputs=bool(files),
            file_options={
                "--input-format": input_format is not None,
                "--separator": separator is not None,
                "--decimal-comma": decimal_comma,
                "--on-invalid": chosen(on_invalid) == "drop",
                "--max-invalid": max_invalid_rows is not None,
            },
        )
        if target is not None:
            if kind == "importance":
                raise UsageError(
                    "--emit-sql does not record --weight-kind importance in the summary yet: "
                    "summarise the rows with calib summarize --weight-kind importance"
                )
            from calib_cli.workflows.export_sql import SummarizeSqlRequest, run_summarize_sql

            if (score_col is not None and len(score_col) > 1) or report is not None:
                raise UsageError("--emit-sql takes one --score-col and writes no --report")
            sql_request = SummarizeSqlRequest(
                dialect=target[0],
                table=target[1],
                score_col=(score_col or ["score"])[0],
                label_col=label_col,
                weight_col=weight_col,
                by=by,
                positive_label=positive_label,
                bins=bins,
                grid_bits=grid_bits,
                output=output or "-",
            )
            run_summarize_sql(sql_request, warn=session.warn)
            return
        if not files:
            raise UsageError("missing argument 'FILES...' (or --emit-sql --dialect D --table T)")
        if output is None:
            raise UsageError("missing option '-o' / '--output'")
        from calib_cli.report.payloads import summarize_payload
        from calib_cli.workflows.summarize import SummarizeRequest, run_summarize

        request = SummarizeRequest(
            files=tuple(files),
            output=output,
            score_cols=tuple(score_col or ["score"]),
            label_col=label_col,
            weight_col=weight_col,
            weight_kind=kind,
            positive_label=positive_label,
            by=by,
            n_bins=bins,
            grid_bits=grid_bits,
            input_format=cast("InputFormat | None", chosen_or_none(input_format)),
            dialect=csv_dialect(separator, decimal_comma),
            on_invalid=cast(OnInvalid, chosen(on_invalid)),
            max_invalid=max_invalid(max_invalid_rows),
            report=report,
        )
        with session.progress(f"summarising {len(files)} file(s)") as step:
            result = run_summarize(request, warn=session.warn, progress=step)
        emit_report(session, summarize_payload(result), as_json=False, report_path=report)
        for written in result.outputs:
            where = "stdout" if written.path == "-" else written.path
            session.info(
                f"{where}: summary of '{written.score_column}' over {result.rows} rows, "
                f"{written.summary.n_keys} keys, {len(written.summary.groups)} group(s)"
            )
