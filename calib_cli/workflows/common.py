"""What every workflow shares: checking paths before work, reading scored tables, groups."""

from __future__ import annotations

import functools
import importlib.util
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from calib_cli import io
from calib_cli.errors import InputError, UsageError
from calib_cli.io import InvalidRows, Table
from calib_cli.io.invalid import check_max_invalid_option
from calib_cli.io.pictures import PLOT_NEEDS, plot_format
from calib_cli.types import (
    DEFAULT_DIALECT,
    MISSING_GROUP,
    BoolArray,
    CsvDialect,
    Engine,
    GroupValue,
    InputFormat,
    OnInvalid,
    ScoreKind,
    Warn,
)

#: ``--engine auto`` streams inputs of more rows than this; below it every figure is exact.
STREAMING_ROWS = 2_000_000


def choose_engine(
    engine: Engine,
    paths: Sequence[str],
    *,
    input_format: InputFormat | None = None,
    warn: Warn | None = None,
) -> Engine:
    """The engine a command runs with: ``memory`` or ``streaming`` as asked; for ``auto``,
    streaming when the inputs together hold more than :data:`STREAMING_ROWS` rows (standard
    input and gzip files, whose size is unknown before reading, stay in memory). Standard
    input cannot be read twice, so it is read into memory first whatever the engine: with
    ``--engine streaming`` a warning says so, in every command."""
    if engine == "streaming" and io.STDIO in paths and warn is not None:
        warn(
            "standard input is read into memory first (it cannot be read twice): "
            "--engine streaming keeps memory bounded for files only"
        )
    if engine != "auto":
        return engine
    total = 0
    for path in paths:
        hint = io.row_count_hint(path, input_format=input_format)
        if hint is None:
            return "memory"
        total += hint
    return "streaming" if total > STREAMING_ROWS else "memory"


#: The request fields that name identity columns (calib_cli.io.identity): a CSV read for a
#: typed output never makes them floating-point numbers.
IDENTITY_OPTIONS = ("by", "batch_col", "strata_col", "fold_col", "key_col")


class _ReadsCsv(Protocol):
    @property
    def dialect(self) -> CsvDialect: ...


_Request = TypeVar("_Request", bound=_ReadsCsv)
_Result = TypeVar("_Result")
_Options = ParamSpec("_Options")


def in_dialect(
    run: Callable[Concatenate[_Request, _Options], _Result],
) -> Callable[Concatenate[_Request, _Options], _Result]:
    """Run a workflow with its request's CSV dialect (``--separator``, ``--decimal-comma``)
    in force for every file it reads and every CSV it writes (:mod:`calib_cli.io.dialect`),
    and its score and weight columns written as numbers in typed outputs
    (:func:`calib_cli.io.reading_numbers`), its identity columns never as floating-point
    numbers (:func:`calib_cli.io.reading_identities`)."""

    @functools.wraps(run)
    def wrapped(request: _Request, /, *args: _Options.args, **kwargs: _Options.kwargs) -> _Result:
        numbers = (getattr(request, name, None) for name in ("score_col", "weight_col"))
        identities = (getattr(request, name, None) for name in IDENTITY_OPTIONS)
        with (
            io.using_dialect(request.dialect),
            io.reading_numbers(numbers),
            io.reading_identities(identities),
        ):
            return run(request, *args, **kwargs)

    return wrapped


#: A step of a long run, for a progress display ("reading scores.parquet: 262,144 rows").
Progress = Callable[[str], None]


def rows_read(progress: Progress, step: str) -> Callable[[int], None]:
    """A callback for a streaming pass: ``progress`` shows ``step`` and the rows read so far
    ("reading big.parquet: 262,144 rows")."""

    def show(rows: int) -> None:
        progress(f"{step}: {rows:,} rows")

    return show


def ignore(message: str) -> None:
    """The default :data:`~calib_cli.types.Warn` and :data:`Progress`: drop the message."""


def check_paths(
    *,
    inputs: Sequence[str | None],
    table_output: str | None = None,
    output_format: InputFormat | None = None,
    files: Sequence[str | None] = (),
    input_format: InputFormat | None = None,
    dialect: CsvDialect = DEFAULT_DIALECT,
    rows_to_stdout: bool = False,
) -> None:
    """Before any work: stdin read at most once, no output over an input, every output
    writable (and a known table format), at most one of them standard output, so a long job
    never ends in a usage error; and a CSV ``dialect`` given only where some input or the rows
    written (to ``table_output``, or to standard output when it is None and
    ``rows_to_stdout``) are CSV or TSV text."""
    rows = io.STDIO if table_output is None and rows_to_stdout else table_output
    io.require_distinct_outputs([rows, *files], inputs)
    io.check_destination(table_output, data_format=output_format, table=True)
    for path in files:
        io.check_destination(path)
    _refuse_unused_dialect(dialect, inputs, rows, input_format, output_format)


def _refuse_unused_dialect(
    dialect: CsvDialect,
    inputs: Sequence[str | None],
    table_output: str | None,
    input_format: InputFormat | None,
    output_format: InputFormat | None,
) -> None:
    """``--separator`` and ``--decimal-comma`` where no input and no table output is CSV or
    TSV text: refused (exit 2). Standard input and files of unknown extension may be text and
    count; ``.json`` files (saved calibrators, sampling records, summaries) do not."""
    if dialect == DEFAULT_DIALECT:
        return
    texts = [
        path
        for path in inputs
        if path is not None
        and not path.lower().endswith(".json")
        and io.resolve_format(path, input_format) in io.TEXT_FORMATS
    ]
    if table_output is not None and not io.typed_output(table_output, output_format):
        texts.append(table_output)
    if not texts:
        option = "--separator" if dialect.separator is not None else "--decimal-comma"
        names = dict.fromkeys(io.display_name(p) for p in inputs if p is not None)
        raise UsageError(
            f"{option} is for CSV and TSV text, and this call reads and writes none "
            f"({', '.join(names)}): drop {option}"
        )


class _ReadsRows(Protocol):
    """The options of a request that say how its rows are read."""

    @property
    def engine(self) -> Engine: ...
    @property
    def input_format(self) -> InputFormat | None: ...
    @property
    def dialect(self) -> CsvDialect: ...
    @property
    def label_col(self) -> str: ...
    @property
    def positive_label(self) -> str | None: ...


def refuse_row_reading_options(
    request: _ReadsRows, why: str, *, on_invalid: OnInvalid = "error"
) -> None:
    """Refuse (exit 2) the options of ``request`` that say how to read rows (and
    ``--on-invalid``, where the command has it), given to a call that reads none (summaries
    only): they would change nothing. ``why`` ends the message. A default ``--label-col``
    cannot be told from one given as the default, and changes nothing."""
    dialect = request.dialect
    for option, given in (
        ("--engine", request.engine != "auto"),
        ("--input-format", request.input_format is not None),
        ("--separator", dialect.separator is not None),
        ("--decimal-comma", dialect.decimal_comma),
        ("--label-col", request.label_col != "label"),
        ("--positive-label", request.positive_label is not None),
        ("--on-invalid", on_invalid == "drop"),
    ):
        if given:
            raise UsageError(f"{option} says how to read rows, and {why}: drop {option}")


#: The request fields that name input columns, each with its option; every one gives its
#: column a role (what the column's values mean).
_COLUMN_ROLES = (
    ("score_col", "--score-col"),
    ("score_cols", "--score-col"),
    ("label_col", "--label-col"),
    ("weight_col", "--weight-col"),
    ("batch_col", "--batch-col"),
    ("by", "--by"),
    ("strata_col", "--strata-col"),
    ("fold_col", "--fold-col"),
    ("key_col", "--key-col"),
)


def refuse_shared_columns(request: object) -> None:
    """Refuse (exit 2), before any work, one input column named by two of ``request``'s column
    options (:data:`_COLUMN_ROLES`): a label read as weights, or scores as batches, gives
    figures of nothing (or a crash), never what was meant. ``--label-col`` counts at its
    default too, where the command has it: the column named ``label`` is read as labels.

    >>> from types import SimpleNamespace
    >>> refuse_shared_columns(SimpleNamespace(label_col="label", weight_col="label"))
    Traceback (most recent call last):
    ...
    calib_cli.errors.UsageError: --label-col (by default) and --weight-col both name the column \
'label', and a column has one role: name another column for one of them
    """
    seen: dict[str, str] = {}
    for field, option in _COLUMN_ROLES:
        value = getattr(request, field, None)
        columns = (value,) if isinstance(value, str) else tuple(value or ())
        for column in columns:
            first = seen.setdefault(column, option)
            if first != option:
                raise UsageError(
                    f"{_named(first, column)} and {_named(option, column)} both name the column "
                    f"'{column}', and a column has one role: name another column for one of them"
                )
        repeated = next((c for c in dict.fromkeys(columns) if columns.count(c) > 1), None)
        if repeated is not None:  # two identical entries, or one group column crossed with itself
            raise UsageError(f"{option} names the column '{repeated}' twice: give it once")


#: The column options that name a column without being given, and that column.
_DEFAULT_COLUMNS = {"--score-col": "score", "--label-col": "label"}


def _named(option: str, column: str) -> str:
    """``option``, saying so where ``column`` is its default (a user may not have given it)."""
    return f"{option} (by default)" if _DEFAULT_COLUMNS.get(option) == column else option


def require_once_each(name: str, strata: Sequence[str], codes: npt.NDArray[np.int64]) -> None:
    """Refuse (exit 65) a table of one row per stratum (``--rates-file``,
    ``--prevalence-file``) where a stratum has two rows: which one holds cannot be told.

    >>> require_once_each("r.csv", ["a", "b"], np.array([0, 1, 1]))
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: r.csv: stratum 'b' has 2 rows; give each stratum one row
    """
    counts = np.bincount(codes, minlength=len(strata))
    if np.any(counts > 1):
        first = int(np.flatnonzero(counts > 1)[0])
        raise InputError(
            f"{name}: stratum {strata[first]!r} has {int(counts[first])} rows; "
            "give each stratum one row"
        )


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


def refuse_added_columns(
    path: str,
    added: Sequence[str],
    *,
    input_format: InputFormat | None,
    output: str,
    output_format: InputFormat | None,
) -> None:
    """Before any work: the columns a command adds to its row-wise ``output`` (``--output-col``
    and the fixed ones) are distinct and none names a column of the input, which they would
    replace, and the input's own columns can be written in the output's format
    (:func:`calib_cli.io.check_passthrough_columns`). The input's columns are known here for
    a file; standard input and gzip files are checked with :func:`refuse_clashing_columns` as
    soon as they are read, and their columns' format when written."""
    for index, column in enumerate(added):
        require_column_name(column, "--output-col")  # the fixed names are never empty
        if column in added[:index]:
            raise UsageError(
                f"--output-col '{column}' is also a column calib adds; choose another output name"
            )
    schema = io.column_schema(path, input_format=input_format)  # read once, for both
    if schema is not None:
        refuse_clashing_columns(io.display_name(path), list(schema), added)
    io.check_passthrough_columns(
        schema, output, name=io.display_name(path), output_format=output_format
    )


def refuse_clashing_columns(name: str, columns: Sequence[str], added: Sequence[str]) -> None:
    """Refuse (exit 2) an added column that names a column of the input ``name``.

    >>> refuse_clashing_columns("t.csv", ["id", "score"], ["score"])
    Traceback (most recent call last):
    ...
    calib_cli.errors.UsageError: t.csv already has a column 'score'; choose another output name
    """
    for column in added:
        if column in columns:
            raise UsageError(f"{name} already has a column '{column}'; choose another output name")


#: ``--output-col``'s default, the column of calibrated probabilities a command adds.
OUTPUT_COL = "calibrated"


def require_column_name(name: str, option: str) -> None:
    """Refuse (exit 2) an empty or blank name for a column a command writes: a CSV header
    cell of nothing, which no later step can name.

    >>> require_column_name(" ", "--output-col")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calib_cli.errors.UsageError: --output-col names the column written, and '' names none: ...
    """
    if not name.strip():
        raise UsageError(
            f"{option} names the column written, and '{name.strip()}' names none: give a name"
        )


def refuse_row_options_without_rows(
    writes_rows: bool, *, output_col: str, output_format: InputFormat | None, why: str
) -> None:
    """``--output-col`` and ``--output-format`` shape the rows a command writes: given to a
    call that writes none (``why``: because of what), they would change nothing, so they are
    refused (exit 2). A default ``--output-col`` cannot be told from one given as the default,
    and changes nothing."""
    if writes_rows:
        require_column_name(output_col, "--output-col")
        return
    for option, given in (
        ("--output-format", output_format is not None),
        ("--output-col", output_col != OUTPUT_COL),
    ):
        if given:
            what = "is the format" if option == "--output-format" else "names a column"
            raise UsageError(
                f"{option} {what} of the rows a call writes, and this one writes none "
                f"({why}): drop {option}"
            )


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
    max_invalid: float | None = None,
    by: str | None = None,
) -> tuple[Table, InvalidRows | None]:
    """Read a table and, with ``--on-invalid drop``, drop rows whose score, label or weight is
    invalid (saying how many, and why, and with ``by`` how many of each group), refusing more
    than ``max_invalid`` of them. Returns the table and what was dropped (None without
    ``--on-invalid drop``)."""
    table = io.read_table(path, input_format=input_format, typed=typed)
    if on_invalid != "drop":
        return table, None
    table, invalid = io.drop_invalid_rows(
        table,
        score_cols=score_cols,
        score_kind=score_kind,
        label_col=label_col,
        positive_label=positive_label,
        weight_col=weight_col,
        max_invalid=max_invalid,
        by=by,
    )
    warn_dropped(invalid, by, warn)
    return table, invalid


#: Groups named in the warning of rows dropped by group, the most affected first.
DROPPED_GROUPS_SHOWN = 5


def warn_dropped(invalid: InvalidRows | None, by: str | None, warn: Warn) -> None:
    """Say what ``--on-invalid drop`` dropped: how many rows and why and, with ``--by``, how
    many of each group (a group's figures are of the rows it kept: rows dropped from one
    group more than others, such as its late labels, make it less like its rows)."""
    if invalid is None or not invalid.dropped:
        return
    warn(invalid.warning())
    if by is None or not invalid.by_group:
        return
    hit = sorted((g for g in invalid.by_group if g[2]), key=lambda g: -g[2] / g[1])
    shown = [
        f"{MISSING_GROUP if value is None else value} {lost:,} of {read:,} ({lost / read:.1%})"
        for value, read, lost in hit[:DROPPED_GROUPS_SHOWN]
    ]
    parts = [", ".join(shown)]
    if len(hit) > DROPPED_GROUPS_SHOWN:
        more = len(hit) - DROPPED_GROUPS_SHOWN
        parts[0] += f" and {more:,} more group{'s' if more > 1 else ''} (the report's invalid_rows)"
    spared = len(invalid.by_group) - len(hit)
    if spared:
        parts.append(f"none from {spared:,} other group{'s' if spared > 1 else ''}")
    warn(
        f"{invalid.name}: dropped rows by {by}: {'; '.join(parts)}; each group's figures are "
        "of the rows it kept"
    )


def check_invalid_options(on_invalid: OnInvalid, max_invalid: float | None) -> None:
    """Before any work: ``--max-invalid`` is a fraction below 1 or a whole count, and goes
    with ``--on-invalid drop`` (exit 2)."""
    check_max_invalid_option(max_invalid)
    if max_invalid is not None and on_invalid != "drop":
        raise UsageError("--max-invalid goes with --on-invalid drop")


def summary_groups(
    names: Sequence[str | None], column: str, option: str, dtype: io.ColumnType | None = None
) -> list[tuple[GroupValue, str | None]]:
    """A summary's groups (text) as (value, name) pairs, the values those the in-memory path
    reports (``--by`` groups, ``--batch-col`` batches), by the rule of
    :mod:`calib_cli.io.identity`: an integer's text as the integer, any other text as itself,
    or, where the column's type is known (``dtype``: a streaming pass over a typed file), as
    that type's value (:func:`calib_cli.io.typed_value`: floats, dates, datetimes); in
    :func:`calib_cli.io.order_key` order; rows without a value last as "(missing)"
    (:func:`calib_cli.io.identity.refuse_missing_name`: not beside a text "(missing)").

    >>> summary_groups(["10", "9", None, "x"], "day", "--by")
    [(9, '9'), (10, '10'), ('x', 'x'), ('(missing)', None)]
    """
    io.refuse_missing_name(names, column, option)
    present = [n for n in names if n is not None]
    values: list[tuple[GroupValue, str | None]] = sorted(
        ((io.typed_value(n, dtype), n) for n in present), key=lambda pair: io.order_key(pair[0])
    )
    if None in names:
        values.append((MISSING_GROUP, None))
    return values


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


def check_plot(path: str | None, scale: str | None = None) -> None:
    """Before any work: ``--plot PATH`` names a picture format (.png, .svg, .pdf), matplotlib
    is installed, and the path is writable; ``--plot-scale`` (``scale``, None when not given)
    goes with it. Pass the path to :func:`check_paths` too (in ``files``), so that it is also
    checked against the inputs and the other outputs."""
    if path is None:
        if scale is not None:
            raise UsageError("--plot-scale sets the axes of --plot; give --plot PATH")
        return
    if io.canonical_output(path) == io.STDIO:
        raise UsageError("--plot needs a file path (.png, .svg or .pdf), not standard output")
    plot_format(path)
    try:
        found = importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UsageError(PLOT_NEEDS)
    io.check_destination(path)
