"""``calib export-sql``: options -> :mod:`calib_cli.workflows.export_sql` -> SQL on stdout."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Annotated, cast

import typer

from calib_cli.cli.options import (
    DebugOpt,
    NoColorOpt,
    QuietOpt,
    choices_phrase,
    chosen,
    chosen_or_none,
)
from calib_cli.cli.session import command_session
from calib_cli.errors import UsageError
from calib_cli.sql.dialects import SQL_DIALECTS
from calib_cli.types import ScoreKind

EPILOG = (
    "Example: calib export-sql model.json --dialect spark --score-col score "
    "> calibrated.sql   (then SELECT <that expression> AS calibrated FROM scores)"
)

DialectChoice = Enum("DialectChoice", {name: name for name in SQL_DIALECTS}, type=str)  # type: ignore[misc]
DIALECTS = choices_phrase(SQL_DIALECTS)
ExportScoreKind = Enum("ExportScoreKind", {k: k for k in ("probability", "logit", "raw")}, type=str)  # type: ignore[misc]


EmitSqlOpt = Annotated[
    bool,
    typer.Option(
        "--emit-sql", help="Print the SQL that does this inside an engine (--dialect, --table)."
    ),
]
SqlDialectOpt = Annotated[
    DialectChoice | None,
    typer.Option(
        "--dialect",
        metavar="<dialect>",  # the choices are in the help: the list crowded out long names
        help=f"With --emit-sql: the engine's SQL dialect: {DIALECTS}.",
        show_default=False,
    ),
]
TableOpt = Annotated[
    str | None,
    typer.Option("--table", help="With --emit-sql: the table or view to read.", show_default=False),
]


def sql_target(
    emit_sql: bool,
    sql_dialect: Enum | None,
    table: str | None,
    *,
    inputs: bool,
    file_options: Mapping[str, bool] | None = None,
) -> tuple[str, str] | None:
    """``(dialect, table)`` of an --emit-sql run, None for a run on files; mixed or
    incomplete options are usage errors, as are ``file_options`` given (option -> given)
    that only a run on files uses (how to read them, the output's format)."""
    if not emit_sql:
        if sql_dialect is not None or table is not None:
            raise UsageError("--dialect and --table go with --emit-sql")
        return None
    if inputs:
        raise UsageError("--emit-sql reads no FILE: it prints SQL that reads --table")
    for option, given in (file_options or {}).items():
        if given:
            raise UsageError(
                f"{option} does nothing with --emit-sql, which prints SQL for the engine to "
                f"run on --table: drop {option}"
            )
    missing = [
        name for name, value in (("--dialect", sql_dialect), ("--table", table)) if not value
    ]
    if missing or sql_dialect is None or table is None:
        raise UsageError(f"--emit-sql needs {' and '.join(missing)}")
    return chosen(sql_dialect), table


def export_sql(
    model: Annotated[
        str,
        typer.Argument(
            help="A saved calibrator or chain (recalibrate --save-model).", show_default=False
        ),
    ],
    dialect: Annotated[
        DialectChoice,
        typer.Option(
            "--dialect",
            metavar="<dialect>",
            help=f"The engine whose SQL to write: {DIALECTS}.",
            show_default=False,
        ),
    ],
    score_col: Annotated[
        str | None,
        typer.Option("--score-col", help="Column of scores (default: score)."),
    ] = None,
    score_expr: Annotated[
        str | None,
        typer.Option(
            "--score-expr", help="A SQL expression of the scores, in place of --score-col."
        ),
    ] = None,
    score_kind: Annotated[
        ExportScoreKind | None,
        typer.Option(
            "--score-kind",
            metavar="<kind>",
            help="probability, logit or raw (default: a Platt model's own, else probability).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        str, typer.Option("-o", "--output", help="Where to write the SQL ('-': stdout).")
    ] = "-",
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Print one SQL expression computing the calibrated probability of every row, exactly
    as `calib recalibrate --model` applies the calibrator, for DuckDB, Spark, BigQuery,
    Snowflake or Postgres."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        from calib_cli.workflows.export_sql import ExportSqlRequest, run_export_sql

        request = ExportSqlRequest(
            model=model,
            dialect=chosen(dialect),
            score_col=score_col,
            score_expr=score_expr,
            score_kind=cast("ScoreKind | None", chosen_or_none(score_kind)),
            output=output,
        )
        result = run_export_sql(request, warn=session.warn)
        if output != "-":
            session.info(
                f"wrote the {result.dialect} expression of {result.kind} "
                f"({result.n_steps} step{'s' if result.n_steps > 1 else ''}) to {output}"
            )
