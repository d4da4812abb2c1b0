"""What every workflow shares: checking paths before work, reading scored tables, groups."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from collections.abc import Iterator, Sequence

import numpy as np

from calib_cli import io
from calib_cli.errors import UsageError
from calib_cli.io import Table
from calib_cli.types import (
    BoolArray,
    Engine,
    GroupValue,
    InputFormat,
    OnInvalid,
    ScoreKind,
    Warn,
)

#: The group of rows without a value in a --by or --batch-col column.
MISSING_GROUP = "(missing)"


#: ``--engine auto`` streams inputs of more rows than this; below it every figure is exact.
STREAMING_ROWS = 2_000_000


def choose_engine(
    engine: Engine, paths: Sequence[str], *, input_format: InputFormat | None = None
) -> Engine:
    """The engine a command runs with: ``memory`` or ``streaming`` as asked; for ``auto``,
    streaming when the inputs together hold more than :data:`STREAMING_ROWS` rows (standard
    input and gzip files, whose size is unknown before reading, stay in memory)."""
    if engine != "auto":
        return engine
    total = 0
    for path in paths:
        hint = io.row_count_hint(path, input_format=input_format)
        if hint is None:
            return "memory"
        total += hint
    return "streaming" if total > STREAMING_ROWS else "memory"


def ignore(message: str) -> None:
    """The default :data:`~calib_cli.types.Warn`: drop the warning."""


def check_paths(
    *,
    inputs: Sequence[str | None],
    table_output: str | None = None,
    output_format: InputFormat | None = None,
    files: Sequence[str | None] = (),
) -> None:
    """Before any work: stdin read at most once, no output over an input, every output
    writable (and a known table format), so a long job never ends in a usage error."""
    io.require_distinct_outputs([table_output, *files], inputs)
    io.check_destination(table_output, data_format=output_format, table=True)
    for path in files:
        io.check_destination(path)


def finite_option(value: float | None, option: str) -> None:
    """Refuse NaN and infinities given to a numeric option (exit 2)."""
    if value is not None and not math.isfinite(value):
        raise UsageError(f"{option} must be a finite number, got {value}")


def unit_interval_option(value: float | None, option: str) -> None:
    """Refuse a gate or rate outside [0, 1] (and NaN) before any work (exit 2): an ECE, an
    AUC and a probability threshold cannot be anything else.

    >>> unit_interval_option(-0.1, "--fail-above-ece")
    Traceback (most recent call last):
    ...
    calib_cli.errors.UsageError: --fail-above-ece must be in [0, 1], got -0.1
    """
    if value is not None and not 0.0 <= value <= 1.0:
        raise UsageError(f"{option} must be in [0, 1], got {value:g}")


def whole_option(value: int | None, option: str, *, least: int) -> None:
    """Refuse a count below ``least`` before any work (exit 2).

    >>> whole_option(1, "--folds", least=2)
    Traceback (most recent call last):
    ...
    calib_cli.errors.UsageError: --folds must be at least 2, got 1
    """
    if value is not None and value < least:
        raise UsageError(f"{option} must be at least {least}, got {value}")


def data_destination(output: str | None) -> str:
    """-o, else standard output unless it is a terminal (where rows would flood the screen)."""
    if output is not None:
        return output
    if sys.stdout.isatty():
        raise UsageError("give -o PATH for the output (or -o - to print the rows here)")
    return "-"


def read_scored_table(
    path: str,
    *,
    input_format: InputFormat | None,
    score_cols: Sequence[str],
    label_col: str | None,
    weight_col: str | None,
    positive_label: str | None,
    on_invalid: OnInvalid,
    score_kind: ScoreKind = "probability",
    typed: bool = False,
    warn: Warn = ignore,
) -> Table:
    """Read a table and, with ``--on-invalid drop``, drop rows whose score, label or weight is
    invalid (saying how many)."""
    table = io.read_table(path, input_format=input_format, typed=typed)
    if on_invalid == "drop":
        table, dropped = io.drop_invalid_rows(
            table,
            score_cols=score_cols,
            score_kind=score_kind,
            label_col=label_col,
            positive_label=positive_label,
            weight_col=weight_col,
        )
        if dropped:
            warn(
                f"{table.name}: dropped {dropped} invalid {'row' if dropped == 1 else 'rows'} "
                f"of {dropped + table.n_rows}"
            )
    return table


def groups(
    table: Table, column: str | None, *, with_all_rows: bool = False
) -> Iterator[tuple[GroupValue, BoolArray | slice]]:
    """(value, row selector) pairs for --by and --batch-col: all rows (value None) first when
    asked or when there is no column, then each value of the column in its natural order.
    Rows without a value form the group "(missing)"."""
    if column is None or with_all_rows:
        yield None, slice(None)
    if column is None:
        return
    option = "--by" if with_all_rows else "--batch-col"
    values, codes = table.groups(column, option=option)
    for index, value in enumerate(values):
        selector: BoolArray = np.asarray(codes == index, dtype=np.bool_)
        yield (MISSING_GROUP if value is None else value), selector


#: Picture formats of ``--plot``, by extension (the same table as calib_cli.report.plots).
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def check_plot(path: str | None) -> None:
    """Before any work: ``--plot PATH`` names a picture format (.png, .svg, .pdf), matplotlib
    is installed, and the path is writable. Pass the path to :func:`check_paths` too (in
    ``files``), so that it is also checked against the inputs and the other outputs."""
    if path is None:
        return
    if io.canonical_output(path) == io.STDIO:
        raise UsageError("--plot needs a file path (.png, .svg or .pdf), not standard output")
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in PLOT_SUFFIXES:
        shown = f"'{suffix}'" if suffix else "no extension"
        raise UsageError(f"--plot {path}: {shown} is not a picture format; use .png, .svg or .pdf")
    try:
        found = importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UsageError("--plot needs matplotlib: pip install 'calib-cli[plot]'")
    io.check_destination(path)
