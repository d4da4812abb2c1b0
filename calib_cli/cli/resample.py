"""``calib resample``: options -> :mod:`calib_cli.workflows.resample` -> report."""

from __future__ import annotations

from typing import Annotated, cast

import typer

from calib_cli.cli.export_sql import EmitSqlOpt, SqlDialectOpt, TableOpt, sql_target
from calib_cli.cli.options import (
    DEFAULT_SEED,
    INPUT_HELP,
    DebugOpt,
    DecimalCommaOpt,
    InputFormatOpt,
    LabelColOpt,
    NoColorOpt,
    OutputFormatOpt,
    PositiveLabelOpt,
    QuietOpt,
    ReportOpt,
    SeedOpt,
    SeparatorOpt,
    chosen_or_none,
    csv_dialect,
)
from calib_cli.cli.session import command_session, emit_report
from calib_cli.errors import UsageError
from calib_cli.types import InputFormat

EPILOG = (
    "Example: calib resample train.parquet -o train_sample.parquet --negative-rate 0.1 "
    "--key-col user_id --seed 42   (writes train_sample.parquet.sampling.json)"
)


def resample(
    file: Annotated[str | None, typer.Argument(help=INPUT_HELP, show_default=False)] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            help="Output file, or '-' for stdout (--emit-sql: the SQL's file).",
            show_default=False,
        ),
    ] = None,
    negative_rate: Annotated[
        float | None, typer.Option("--negative-rate", help="Keep each negative with probability W.")
    ] = None,
    target_positive_rate: Annotated[
        float | None,
        typer.Option(
            "--target-positive-rate",
            help="Choose W so that the sample's expected positive rate is B'.",
        ),
    ] = None,
    target_ratio: Annotated[
        str | None,
        typer.Option("--target-ratio", help="Choose W for an expected POS:NEG ratio, e.g. 1:4."),
    ] = None,
    positive_rate: Annotated[
        float, typer.Option("--positive-rate", help="Keep each positive with this probability.")
    ] = 1.0,
    strata_col: Annotated[
        str | None,
        typer.Option(
            "--strata-col", help="Sample each stratum at its own rates (see --rates-file)."
        ),
    ] = None,
    rates_file: Annotated[
        str | None,
        typer.Option(
            "--rates-file",
            help="Per-stratum rates: columns stratum, negative_rate, optionally positive_rate.",
        ),
    ] = None,
    key_col: Annotated[
        str | None,
        typer.Option(
            "--key-col",
            help="Hash this id column (rows sharing a key are kept together); "
            "default: the row number.",
        ),
    ] = None,
    weight_col_out: Annotated[
        str | None,
        typer.Option("--weight-col-out", help="Add importance weights 1/rate under this name."),
    ] = None,
    record: Annotated[
        str | None,
        typer.Option(
            "--record",
            help="Where to write the sampling record (default: the output path + .sampling.json).",
        ),
    ] = None,
    label_col: LabelColOpt = "label",
    positive_label: PositiveLabelOpt = None,
    input_format: InputFormatOpt = None,
    separator: SeparatorOpt = None,
    decimal_comma: DecimalCommaOpt = False,
    output_format: OutputFormatOpt = None,
    report: ReportOpt = None,
    seed: SeedOpt = DEFAULT_SEED,
    emit_sql: EmitSqlOpt = False,
    sql_dialect: SqlDialectOpt = None,
    table: TableOpt = None,
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Downsample negatives (and optionally positives) by a deterministic, portable hash rule,
    streaming, and record the rates for `calib recalibrate --sampling-record`."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        target = sql_target(
            emit_sql,
            sql_dialect,
            table,
            inputs=file is not None,
            file_options={
                "--input-format": input_format is not None,
                "--separator": separator is not None,
                "--decimal-comma": decimal_comma,
                "--output-format": output_format is not None,
            },
        )
        if target is not None:
            from calib_cli.workflows.export_sql import ResampleSqlRequest, run_resample_sql

            if record is not None or report is not None:
                raise UsageError("--emit-sql writes no --record or --report (the engine samples)")
            sql_request = ResampleSqlRequest(
                dialect=target[0],
                table=target[1],
                key_col=key_col,
                label_col=label_col,
                positive_label=positive_label,
                seed=seed,
                negative_rate=negative_rate,
                positive_rate=positive_rate,
                target_positive_rate=target_positive_rate,
                target_ratio=target_ratio,
                strata_col=strata_col,
                rates_file=rates_file,
                weight_col_out=weight_col_out,
                output=output or "-",
            )
            run_resample_sql(sql_request, warn=session.warn)
            return
        if file is None:
            raise UsageError("missing argument 'FILE' (or --emit-sql --dialect D --table T)")
        if output is None:
            raise UsageError("missing option '-o' / '--output'")
        from calib_cli.report.payloads import resample_payload
        from calib_cli.report.tables import resample_table
        from calib_cli.workflows.resample import ResampleRequest, run_resample

        request = ResampleRequest(
            file=file,
            output=output,
            negative_rate=negative_rate,
            target_positive_rate=target_positive_rate,
            target_ratio=target_ratio,
            positive_rate=positive_rate,
            strata_col=strata_col,
            rates_file=rates_file,
            key_col=key_col,
            weight_col_out=weight_col_out,
            record=record,
            label_col=label_col,
            positive_label=positive_label,
            input_format=cast("InputFormat | None", chosen_or_none(input_format)),
            dialect=csv_dialect(separator, decimal_comma),
            output_format=cast("InputFormat | None", chosen_or_none(output_format)),
            report=report,
            seed=seed,
        )
        with session.progress("resample") as step:
            result = run_resample(request, warn=session.warn, progress=step)
        emit_report(session, resample_payload(result), as_json=False, report_path=report)
        session.info(resample_table(result))
        session.info(f"sampling record: {result.record_path}")
