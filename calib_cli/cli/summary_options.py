"""Options that read summary files in place of rows (``--fit-summary``,
``--reference-summary``, ``--target-summary``): one definition each, as ``Annotated`` types.
Each takes files, a directory of part files or a quoted glob
(:mod:`calib_cli.workflows.summary_paths`)."""

from __future__ import annotations

from typing import Annotated

import typer

from calib_cli.cli.export_sql import DIALECTS, DialectChoice

_ENGINE_SUMMARY = "calib summarize, or summarize --emit-sql run in an engine"

FitSummaryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fit-summary",
        help=f"Fit on summary files ({_ENGINE_SUMMARY}) instead of rows: a file, a "
        "directory of part files or a quoted glob; repeat for more (merged; --by groups "
        "pooled). Needs --method.",
        show_default=False,
    ),
]
ReferenceSummaryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--reference-summary",
        help=f"The reference as summary files ({_ENGINE_SUMMARY}: a file, a directory of "
        "part files or a quoted glob) instead of --reference; repeat for more (merged).",
        show_default=False,
    ),
]
TargetSummaryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--target-summary",
        help="The target as summary files instead of --target; repeat for more (merged). "
        "--batch-col names their --by column; no -o (no rows).",
        show_default=False,
    ),
]
RefineSummaryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--refine-summary",
        help="Isotonic or histogram --fit-summary: summaries on finer grids of the rows of "
        "the cells it left open (the --refine-sql query run in the engine); repeat for each "
        "round.",
        show_default=False,
    ),
]
RefineSqlOpt = Annotated[
    str | None,
    typer.Option(
        "--refine-sql",
        help="Isotonic or histogram --fit-summary not exact: write the query that summarises "
        "the open cells' rows on a finer grid (with --dialect and --table).",
        show_default=False,
    ),
]
RefineDialectOpt = Annotated[
    DialectChoice | None,
    typer.Option(
        "--dialect",
        metavar="<dialect>",
        help=f"With --refine-sql: the engine's SQL dialect: {DIALECTS}.",
        show_default=False,
    ),
]
RefineTableOpt = Annotated[
    str | None,
    typer.Option("--table", help="With --refine-sql: the table summarised.", show_default=False),
]
