"""The options commands share, and the choices built from the ``Literal`` aliases of
:mod:`calib_cli.types` (defined once, so help text and library cannot drift apart)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

import typer

from calib_cli.types import (
    BinStrategy,
    CalibrationMethod,
    CiMethod,
    Engine,
    FitData,
    InputFormat,
    OnInvalid,
    PlotScale,
    ScoreKind,
    ShiftMethod,
    SlopeSmoothing,
    choices,
)


def _choice_enum(name: str, alias: object) -> type[Enum]:
    """A str Enum for Typer built from a Literal alias in types.py (choices defined once)."""
    return Enum(name, {value: value for value in choices(alias)}, type=str)  # type: ignore[return-value]


# Typer reads these classes from the annotations at run time; to mypy they are opaque.
InputFormatChoice: Any = _choice_enum("InputFormatChoice", InputFormat)
ScoreKindChoice: Any = _choice_enum("ScoreKindChoice", ScoreKind)
BinStrategyChoice: Any = _choice_enum("BinStrategyChoice", BinStrategy)
OnInvalidChoice: Any = _choice_enum("OnInvalidChoice", OnInvalid)
CalibrationMethodChoice: Any = _choice_enum("CalibrationMethodChoice", CalibrationMethod)
FitDataChoice: Any = _choice_enum("FitDataChoice", FitData)
SlopeSmoothingChoice: Any = _choice_enum("SlopeSmoothingChoice", SlopeSmoothing)
ShiftMethodChoice: Any = _choice_enum("ShiftMethodChoice", ShiftMethod)
CiMethodChoice: Any = _choice_enum("CiMethodChoice", CiMethod)
EngineChoice: Any = _choice_enum("EngineChoice", Engine)


def chosen(choice: Enum | str) -> str:
    """The value of a choice option (Typer passes the Enum member)."""
    return str(choice.value) if isinstance(choice, Enum) else choice


def chosen_or_none(choice: Enum | str | None) -> str | None:
    """The value of an optional choice option."""
    return None if choice is None else chosen(choice)


# ----------------------------------------------------------------------- shared options

INPUT_HELP = "Input file (CSV, TSV, Parquet, Arrow IPC, NDJSON; .gz for text), or '-' for stdin."
ScoreColOpt = Annotated[str, typer.Option("--score-col", help="Column of scores.")]
LabelColOpt = Annotated[str, typer.Option("--label-col", help="Column of 0/1 labels.")]
WeightColOpt = Annotated[
    str | None, typer.Option("--weight-col", help="Column of non-negative sample weights.")
]
PositiveLabelOpt = Annotated[
    str | None,
    typer.Option(
        "--positive-label",
        help="The label value that means positive, when labels are not 0/1 or true/false.",
    ),
]
InputFormatOpt = Annotated[
    InputFormatChoice | None,
    typer.Option(
        "--input-format",
        help="Read inputs as this format (default: by extension; sniffed on stdin).",
    ),
]
OutputFormatOpt = Annotated[
    InputFormatChoice | None,
    typer.Option(
        "--output-format", help="Write as this format (default: by extension; CSV on stdout)."
    ),
]
ScoreKindOpt = Annotated[
    ScoreKindChoice,
    typer.Option("--score-kind", help="probability in [0, 1], logit, or raw margin."),
]
OnInvalidOpt = Annotated[
    OnInvalidChoice,
    typer.Option("--on-invalid", help="error: refuse bad rows; drop: drop them and say how many."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]
ReportOpt = Annotated[
    str | None, typer.Option("--report", help="Also write the JSON report to this file.")
]
QuietOpt = Annotated[bool, typer.Option("-q", "--quiet", help="Print nothing but errors.")]
NoColorOpt = Annotated[bool, typer.Option("--no-color", help="No colour (also NO_COLOR=1).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of all randomness (recorded).")]
EngineOpt = Annotated[
    EngineChoice,
    typer.Option(
        "--engine",
        help=(
            "memory: every row in memory, exact; streaming: bounded memory through a summary "
            "(see README); auto: streaming above 2,000,000 rows."
        ),
    ),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show the traceback of an internal error.")]
DEFAULT_SEED = 0

# ------------------------------------------------------------------------------- pictures
PlotScaleChoice: Any = _choice_enum("PlotScaleChoice", PlotScale)
PlotOpt = Annotated[
    str | None,
    typer.Option(
        "--plot",
        help=(
            "Also draw a picture to this file (.png, .svg or .pdf, by extension); needs "
            "matplotlib: pip install 'calib-cli[plot]'."
        ),
    ),
]
PlotScaleOpt = Annotated[
    PlotScaleChoice,
    typer.Option(
        "--plot-scale",
        help="Probability axes of --plot: linear, or logit (keeps 0.1% and 1% apart).",
    ),
]
