"""Options that read summary files in place of rows (``--fit-summary``,
``--reference-summary``, ``--target-summary``): one definition each, as ``Annotated`` types.
Each takes files, a directory of part files or a quoted glob
(:mod:`calib_cli.workflows.summary_paths`)."""

from __future__ import annotations

from typing import Annotated

import typer

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
