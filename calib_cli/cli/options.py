"""The options commands share, and the choices built from the ``Literal`` aliases of
:mod:`calib_cli.types` (defined once, so help text and library cannot drift apart)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, get_args

import typer

from calib_cli.errors import UsageError
from calib_cli.types import (
    BinStrategy,
    CalibrationMethod,
    CiMethod,
    CsvDialect,
    Engine,
    FitData,
    InputFormat,
    OnInvalid,
    PlotScale,
    ScoreKind,
    ShiftMethod,
    SlopeSmoothing,
    WeightKind,
    choices,
)


def _choice_enum(name: str, alias: object) -> type[Enum]:
    """A str Enum for Typer built from a Literal alias in types.py (choices defined once)."""
    return Enum(name, {value: value for value in choices(alias)}, type=str)  # type: ignore[return-value]


# Typer reads these classes from the annotations at run time; to mypy they are opaque.
InputFormatChoice: Any = _choice_enum("InputFormatChoice", InputFormat)


def choices_phrase(choices: tuple[str, ...]) -> str:
    """``a, b or c``: the choices of an option named in its help (its metavar is short).

    >>> choices_phrase(("csv", "tsv", "parquet"))
    'csv, tsv or parquet'
    """
    return ", ".join(choices[:-1]) + f" or {choices[-1]}"


def range_phrase(low: float | None, high: float | None) -> str:
    """The bounds of an option's values, as its help gives them.

    >>> range_phrase(1, None), range_phrase(2, 100), range_phrase(None, 0.5)
    ('at least 1', '2 to 100', 'at most 0.5')
    """
    if low is not None and high is not None:
        return f"{low:,} to {high:,}"
    if low is not None:
        return f"at least {low:,}"
    return f"at most {high:,}"


def in_range(
    help: str | None, *, low: float | None = None, high: float | None = None
) -> dict[str, Any]:
    """``typer.Option`` keywords of a number option checked against ``[low, high]``: a
    check of the value, and ``help`` with the bounds before its last full stop (or at its
    end); None: the caller's help gives the bounds in its own words. Not ``min=``/``max=``:
    Typer writes those bounds in the metavar column (``<int range> [1<=x<=10000]``), which
    took a fifth of an 80-column help and cut long option names.

    >>> in_range("Number of bins.", low=1, high=10_000)["help"]
    'Number of bins (1 to 10,000).'
    """

    def check(param: typer.CallbackParam, value: float | None) -> float | None:
        if value is not None and not (
            (low is None or value >= low) and (high is None or value <= high)
        ):
            name = next((o for o in param.opts if o.startswith("--")), param.opts[0])
            raise typer.BadParameter(  # the hint given: some Click versions add "(env var: ...)"
                f"must be {range_phrase(low, high)} (got {value})", param_hint=f"'{name}'"
            )
        return value

    keywords: dict[str, Any] = {"callback": check}
    if help is not None:
        phrase = f" ({range_phrase(low, high)})"
        keywords["help"] = help[:-1] + phrase + "." if help.endswith(".") else help + phrase
    return keywords


_FORMATS = choices_phrase(get_args(InputFormat))
ScoreKindChoice: Any = _choice_enum("ScoreKindChoice", ScoreKind)
BinStrategyChoice: Any = _choice_enum("BinStrategyChoice", BinStrategy)
OnInvalidChoice: Any = _choice_enum("OnInvalidChoice", OnInvalid)
CalibrationMethodChoice: Any = _choice_enum("CalibrationMethodChoice", CalibrationMethod)
FitDataChoice: Any = _choice_enum("FitDataChoice", FitData)
SlopeSmoothingChoice: Any = _choice_enum("SlopeSmoothingChoice", SlopeSmoothing)
ShiftMethodChoice: Any = _choice_enum("ShiftMethodChoice", ShiftMethod)
CiMethodChoice: Any = _choice_enum("CiMethodChoice", CiMethod)
EngineChoice: Any = _choice_enum("EngineChoice", Engine)
WeightKindChoice: Any = _choice_enum("WeightKindChoice", WeightKind)


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
ReferenceWeightColOpt = Annotated[
    str | None, typer.Option("--weight-col", help="Column of reference sample weights.")
]
WeightKindOpt = Annotated[
    WeightKindChoice | None,
    typer.Option(
        "--weight-kind",
        metavar="<kind>",  # the choices are in the help: "<frequency|importance>" crowded out
        # the option names at 80 columns ("--estimate-target-p…")
        help=(
            "What --weight-col means: frequency (a row of weight 2 is two rows) or importance "
            "(survey weights such as the 1/rate of resample --weight-col-out: the same "
            "figures, with intervals and tests from the rows observed)."
        ),
        show_default="frequency",
    ),
]


def weight_kind(choice: Enum | str | None, weight_col: str | None) -> WeightKind | None:
    """``--weight-kind`` (None when not given); ``importance`` needs a weight column.

    >>> weight_kind("importance", "iw"), weight_kind(None, None)
    ('importance', None)
    >>> weight_kind("importance", None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calib_cli.errors.UsageError: --weight-kind importance needs --weight-col (the weights): ...
    """
    value = chosen_or_none(choice)
    if value is None:
        return None
    if value == "importance" and weight_col is None:
        raise UsageError(
            "--weight-kind importance needs --weight-col (the weights): name the weight "
            "column with --weight-col, or drop --weight-kind"
        )
    return "importance" if value == "importance" else "frequency"


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
        metavar="<format>",  # the choices are in the help: the list crowded out long names
        help=f"Read inputs as {_FORMATS} (default: by extension; sniffed on stdin).",
    ),
]
OutputFormatOpt = Annotated[
    InputFormatChoice | None,
    typer.Option(
        "--output-format",
        metavar="<format>",
        help=f"Write as {_FORMATS} (default: by extension; CSV on stdout).",
    ),
]
ScoreKindOpt = Annotated[
    ScoreKindChoice,
    typer.Option(
        "--score-kind", metavar="<kind>", help="probability in [0, 1], logit, or raw margin."
    ),
]
OnInvalidOpt = Annotated[
    OnInvalidChoice,
    typer.Option(
        "--on-invalid",
        help="error: refuse bad rows; drop: drop them (up to --max-invalid), saying why.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]
ReportOpt = Annotated[
    str | None, typer.Option("--report", help="Also write the JSON report to this file.")
]
QuietOpt = Annotated[bool, typer.Option("-q", "--quiet", help="Print nothing but errors.")]
NoColorOpt = Annotated[bool, typer.Option("--no-color", help="No colour (also NO_COLOR=1).")]


def _seed_in_range(value: int) -> int:
    """A seed is a 64-bit unsigned integer (the sampling hash mixes it as one): refused
    otherwise before any work, in every command, in one line."""
    if not 0 <= value <= 2**64 - 1:
        raise typer.BadParameter(  # the hint given: some Click versions add "(env var: ...)"
            f"a seed is a whole number from 0 to 2**64 - 1, got {value}", param_hint="'--seed'"
        )
    return value


SeedOpt = Annotated[
    int,
    typer.Option(
        "--seed", callback=_seed_in_range, help="Seed of all randomness (recorded), 0 to 2**64 - 1."
    ),
]
EngineOpt = Annotated[
    EngineChoice,
    typer.Option(
        "--engine",
        metavar="<engine>",
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
            "matplotlib: pip install 'calib-cli\\[plot]'."  # \\[: not Rich markup
        ),
    ),
]
PlotScaleOpt = Annotated[
    PlotScaleChoice | None,
    typer.Option(
        "--plot-scale",
        metavar="<scale>",  # the choices are in the help
        help="Probability axes of --plot: linear, or logit (keeps 0.1% and 1% apart).",
        show_default="linear",
    ),
]

# ---------------------------------------------------------------------------- CSV dialect
_NAMED = {"tab": "\t", "\\t": "\t", "\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}


def parse_separator(value: str) -> str:
    """The separator an option names: one character, or ``tab`` (also ``\\t``), ``comma``,
    ``semicolon``, ``pipe``.

    >>> parse_separator(";"), parse_separator("tab"), parse_separator("\\\\t")
    (';', '\\t', '\\t')
    >>> parse_separator(";;")
    Traceback (most recent call last):
    ...
    calib_cli.errors.UsageError: --separator must be one character or 'tab', got ';;'
    """
    separator = _NAMED.get(value.lower() if len(value) > 1 else value, value)
    if len(separator) != 1:
        raise UsageError(f"--separator must be one character or 'tab', got {value!r}")
    if separator in ('"', "\n", "\r"):
        raise UsageError(f"--separator cannot be {value!r} (a quote or a line break)")
    return separator


SeparatorOpt = Annotated[
    str | None,
    typer.Option(
        "--separator",
        metavar="CHAR",
        help=(
            "Field separator of CSV inputs: one character (';', '|') or 'tab' (default: ',' "
            "for CSV, tab for TSV). CSV outputs are written with it too."
        ),
        show_default=False,
    ),
]
DecimalCommaOpt = Annotated[
    bool,
    typer.Option(
        "--decimal-comma",
        help=(
            "Numbers in CSV inputs use a decimal comma (0,37); the numbers calib adds to CSV "
            "outputs are written that way too."
        ),
    ),
]


def csv_dialect(separator: str | None, decimal_comma: bool) -> CsvDialect:
    """The dialect of ``--separator`` and ``--decimal-comma`` (a bad separator: exit 2)."""
    return CsvDialect(
        separator=None if separator is None else parse_separator(separator),
        decimal_comma=decimal_comma,
    )


MaxInvalidOpt = Annotated[
    str | None,
    typer.Option(
        "--max-invalid",
        metavar="FRACTION|COUNT",
        help=(
            "With --on-invalid drop: refuse (exit 65, nothing written) when more rows are "
            "invalid than this: a fraction of the rows below 1 (0.05 or 5%), else a count "
            "of rows. \\[default: 1%]"
        ),
        show_default=False,
    ),
]


def max_invalid(value: str | None) -> float | None:
    """``--max-invalid`` as a number: ``5%`` is 0.05, ``0.05`` a fraction, ``50`` a count
    (None when not given: the default, 1%).

    >>> max_invalid("5%"), max_invalid("0.02"), max_invalid("50"), max_invalid(None)
    (0.05, 0.02, 50.0, None)
    """
    if value is None:
        return None
    text = value.strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise UsageError(
            f"--max-invalid must be a fraction (0.05 or 5%) or a count of rows, got {value!r}"
        ) from None
    if text.endswith("%") and not 0 <= number < 1:
        raise UsageError(f"--max-invalid must be a percentage below 100%, got {value!r}")
    return number
