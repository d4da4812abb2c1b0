"""Reading and writing tables: the only module that imports Polars.

Formats (DESIGN.md, "Inputs"): CSV (``.csv``, ``.csv.gz``), TSV (``.tsv``, ``.tsv.gz``), Parquet
(``.parquet``, ``.pq``), Arrow IPC (``.arrow``, ``.ipc``, ``.feather``), NDJSON (``.ndjson``,
``.jsonl``). ``-`` is standard input (format sniffed from the first bytes) or standard output.

CSV and TSV are read with every column as text, and only the columns a command uses are
converted to numbers. Pass-through columns therefore come out exactly as they went in
(``007`` stays ``007``, ``1.50`` stays ``1.50``). When the output is a typed format (Parquet,
Arrow, NDJSON), column types are inferred from the whole file instead (``typed=True``), so
numbers become numbers there.

Every error names the file, and every file is written atomically: to a temporary file in the
destination's directory, then renamed over the destination.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from calib_cli.core.checks import bad_values_message, check_scores, check_weights
from calib_cli.errors import InputError, MissingInputError, OutputError, UsageError
from calib_cli.types import FloatArray, InputFormat, ScoreKind

STDIO = "-"

_EXTENSIONS: dict[str, InputFormat] = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".ipc": "arrow",
    ".feather": "arrow",
    ".ndjson": "ndjson",
    ".jsonl": "ndjson",
}

_GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = b"PAR1"
_ARROW_FILE_MAGIC = b"ARROW1"
_ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"
_TRUE_TEXT = frozenset({"1", "1.0", "true", "t", "yes", "y"})
_FALSE_TEXT = frozenset({"0", "0.0", "false", "f", "no", "n"})


_STDOUT_ALIASES = frozenset({"/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"})


def canonical_output(path: str) -> str:
    """``-`` for the names of standard output (so ``-o /dev/stdout > file`` appends to the
    shell's file instead of renaming over it), else the path as given."""
    return STDIO if path in _STDOUT_ALIASES else path


def display_name(path: str) -> str:
    """The name used for a file in messages: ``stdin`` for ``-``, else the path as given."""
    return "stdin" if path == STDIO else path


def _split_gz(path: str) -> tuple[str, bool]:
    lower = path.lower()
    if lower.endswith(".gz"):
        return path[:-3], True
    return path, False


def format_from_extension(path: str) -> InputFormat | None:
    """The format a file name implies, or ``None`` when its extension is not known.

    >>> format_from_extension("scores.csv.gz"), format_from_extension("x.feather")
    ('csv', 'arrow')
    """
    stem, _ = _split_gz(path)
    return _EXTENSIONS.get(Path(stem).suffix.lower())


def sniff_format(head: bytes) -> InputFormat:
    """The format of (decompressed) bytes read from a pipe: Parquet, Arrow, NDJSON, TSV or CSV.

    >>> sniff_format(b"PAR1..."), sniff_format(b"a\\tb\\n1\\t2\\n"), sniff_format(b"a,b\\n")
    ('parquet', 'tsv', 'csv')
    """
    if head.startswith(_PARQUET_MAGIC):
        return "parquet"
    if head.startswith(_ARROW_FILE_MAGIC) or head.startswith(_ARROW_STREAM_MAGIC):
        return "arrow"
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        return "ndjson"
    first_line = head.split(b"\n", 1)[0]
    if b"\t" in first_line and b"," not in first_line:
        return "tsv"
    return "csv"


@dataclass(frozen=True)
class Table:
    """A data table read from one file, with the name used for it in messages."""

    frame: pl.DataFrame
    name: str
    format: InputFormat
    #: 0-based rows of the file that this table holds, when rows were dropped
    #: (``--on-invalid drop``), so that messages still name the file's row numbers
    row_numbers: Any = None

    def context(self) -> contextlib.AbstractContextManager[None]:
        """Errors raised inside name this file and its own row numbers."""
        return naming(self.name, rows=self.row_numbers)

    @property
    def n_rows(self) -> int:
        return self.frame.height

    @property
    def columns(self) -> list[str]:
        return self.frame.columns

    def has_column(self, column: str) -> bool:
        return column in self.frame.columns

    def require_column(self, column: str, *, option: str | None = None) -> pl.Series:
        """The column, or an InputError naming the file, the column and the columns it has."""
        if column not in self.frame.columns:
            shown = ", ".join(self.frame.columns[:20])
            more = ", ..." if len(self.frame.columns) > 20 else ""
            hint = f" (set {option})" if option else ""
            raise InputError(f"{self.name}: no column '{column}'{hint}; columns are: {shown}{more}")
        return self.frame.get_column(column)

    def scores(
        self, column: str, *, kind: ScoreKind = "probability", option: str = "--score-col"
    ) -> FloatArray:
        """A score column as clean float64 (probabilities inside [0, 1] unless ``kind`` says)."""
        with self.context():
            values = _as_float(self.require_column(column, option=option), self.name)
            return check_scores(values, name=column, kind=kind)

    def labels(
        self, column: str, *, positive_label: str | None = None, option: str = "--label-col"
    ) -> FloatArray:
        """A label column as float64 0/1: 0/1 numbers, booleans, or two values with
        ``positive_label`` naming the positive one."""
        series = self.require_column(column, option=option)
        with self.context():
            return _parse_labels(series, column, positive_label)

    def weights(self, column: str | None) -> FloatArray:
        """Sample weights (ones when ``column`` is None): finite and non-negative."""
        if column is None:
            return np.ones(self.n_rows, dtype=np.float64)
        with self.context():
            values = _as_float(self.require_column(column, option="--weight-col"), self.name)
            return check_weights(values, self.n_rows, name=column)

    def numbers(self, column: str, *, option: str | None = None) -> FloatArray:
        """Any numeric column (features) as float64; missing values are refused."""
        with self.context():
            values = _as_float(self.require_column(column, option=option), self.name)
            missing = np.isnan(values)
            if missing.any():
                raise InputError(bad_values_message(column, "missing or NaN", missing, values))
            return values

    def groups(self, column: str, *, option: str | None = None) -> tuple[list[Any], Any]:
        """A grouping column (``--by``, ``--batch-col``) as (distinct values, code per row).

        Values keep their type (numbers sort as numbers, text as text) so JSON reports show
        them as they are; rows with a missing value form a last group whose value is ``None``.
        """
        series = self.require_column(column, option=option)
        if self.format in TEXT_FORMATS and series.dtype == pl.String:
            as_number = series.str.strip_chars().cast(pl.Int64, strict=False)
            if as_number.null_count() == series.null_count():
                series = as_number
            else:
                as_float = series.str.strip_chars().cast(pl.Float64, strict=False)
                if as_float.null_count() == series.null_count():
                    series = as_float
        if series.dtype.is_float():
            series = series.fill_nan(None)  # NaN is a missing value, not a group of its own
        distinct = series.drop_nulls().unique().sort()
        values: list[Any] = distinct.to_list()
        frame = pl.DataFrame({"value": distinct, "code": np.arange(distinct.len())})
        codes = (
            pl.DataFrame({"value": series})
            .join(frame, on="value", how="left", maintain_order="left")["code"]
            .fill_null(len(values))
            .to_numpy()
            .astype(np.int64)
        )
        if series.null_count():
            values.append(None)
        return values, codes

    def text(self, column: str, *, option: str | None = None) -> Any:
        """A column's values as text (NumPy array of str); missing values are refused."""
        names, codes = self.categories(column, option=option)
        return np.asarray(names, dtype=str)[codes]

    def categories(self, column: str, *, option: str | None = None) -> tuple[list[str], Any]:
        """A grouping column as (sorted distinct values as text, integer code per row).

        Missing values are refused: a row without a group or stratum cannot be placed.
        """
        series = self.require_column(column, option=option)
        missing = series.is_null().to_numpy()
        if missing.any():
            with self.context():
                raise InputError(bad_values_message(column, "missing", missing, series.to_numpy()))
        text = series.cast(pl.String)
        names = text.unique().sort()
        lookup = pl.DataFrame({"value": names, "code": np.arange(names.len(), dtype=np.int64)})
        codes = (
            text.to_frame("value")
            .join(lookup, on="value", how="left", maintain_order="left")["code"]
            .to_numpy()
        )
        return [str(n) for n in names.to_list()], codes.astype(np.int64)

    def with_columns(self, added: Mapping[str, Any]) -> pl.DataFrame:
        """The input's columns in their order, then ``added`` (refusing to overwrite one)."""
        clash = [name for name in added if name in self.frame.columns]
        if clash:
            raise UsageError(
                f"{self.name} already has a column '{clash[0]}'; choose another output name"
            )
        return self.frame.with_columns(
            [pl.Series(name, np.asarray(values)) for name, values in added.items()]
        )


_FIRST_ROW = re.compile(r"(first at row )(\d+)")


@contextlib.contextmanager
def naming(name: str, *, rows: Any = None) -> Iterator[None]:
    """Prefix InputErrors raised inside with the file's name (core errors do not know it).

    ``rows`` maps the rows of a filtered table back to the file's 0-based rows, so that
    "first at row N" names the row of the file, not of what was left after dropping rows.
    """
    try:
        yield
    except InputError as error:
        message = str(error)
        if rows is not None:
            message = _FIRST_ROW.sub(
                lambda m: f"{m.group(1)}{int(rows[int(m.group(2)) - 1]) + 1}", message
            )
        if not message.startswith(f"{name}: "):
            message = f"{name}: {message}"
        if message == str(error):
            raise
        raise type(error)(message) from None


def _as_float(series: pl.Series, name: str) -> FloatArray:
    """A column as float64 with nulls as NaN, refusing text that is not a number."""
    if series.dtype == pl.Boolean:
        return series.cast(pl.Float64).fill_null(np.nan).to_numpy().astype(np.float64)
    if series.dtype.is_numeric():
        return series.cast(pl.Float64).fill_null(np.nan).to_numpy().astype(np.float64)
    if series.dtype == pl.String:
        stripped = series.str.strip_chars()
        converted = stripped.cast(pl.Float64, strict=False)
        not_numbers = (converted.is_null() & stripped.is_not_null() & (stripped != "")).to_numpy()
        if not_numbers.any():
            raise InputError(
                f"{name}: "
                + bad_values_message(
                    series.name, "that are not numbers", not_numbers, series.to_numpy()
                )
            )
        return converted.fill_null(np.nan).to_numpy().astype(np.float64)
    raise InputError(f"{name}: column '{series.name}' has type {series.dtype}, not numbers")


def _as_number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _parse_labels(series: pl.Series, column: str, positive_label: str | None) -> FloatArray:
    """Labels as 0.0/1.0 by the rules of :func:`positive_label_expr` (shared with streaming
    ``resample`` and ``--on-invalid drop``), refusing missing or unreadable values."""
    missing = series.is_null().to_numpy()
    if series.dtype == pl.String:
        missing |= (series.str.strip_chars() == "").fill_null(True).to_numpy()
    if missing.any():
        raise InputError(bad_values_message(column, "missing", missing, series.to_numpy()))
    is_positive, is_valid = positive_label_expr(column, series.dtype, positive_label)
    flags = series.to_frame(column).select(
        is_positive.fill_null(False).alias("positive"), is_valid.fill_null(False).alias("valid")
    )
    invalid = ~flags["valid"].to_numpy()
    if invalid.any():
        problem = (
            "that are not 0 or 1"
            if series.dtype.is_numeric()
            else ("that are not 0/1 or true/false")
        )
        raise InputError(
            bad_values_message(column, problem, invalid, series.to_numpy())
            + "; name the positive value with --positive-label"
        )
    positive = flags["positive"].to_numpy()
    if positive_label is not None:
        _require_two_values(series, column, positive_label, bool(positive.any()))
    return positive.astype(np.float64)


def _require_two_values(
    series: pl.Series, column: str, positive_label: str, any_positive: bool
) -> None:
    """With --positive-label, a label column takes two values, one of them the positive."""
    distinct = series.cast(pl.String).str.strip_chars().unique()
    if distinct.len() > 2:
        shown = ", ".join(repr(v) for v in distinct.sort().head(5).to_list())
        raise InputError(
            f"column '{column}' has {distinct.len()} distinct values ({shown}...); "
            "labels must take two values"
        )
    if distinct.len() == 2 and not any_positive:
        raise InputError(f"column '{column}' never equals --positive-label {positive_label!r}")


# ---------------------------------------------------------------------------------- reading


def _read_source_bytes(path: str) -> bytes:
    try:
        if path == STDIO:
            return sys.stdin.buffer.read()
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise MissingInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise MissingInputError(f"{path}: is a directory, not a file") from None
    except PermissionError:
        raise MissingInputError(f"{path}: permission denied") from None
    except OSError as error:
        raise MissingInputError(f"{display_name(path)}: cannot read ({error.strerror})") from None


def _check_exists(path: str) -> None:
    if path == STDIO:
        return
    target = Path(path)
    if not target.exists():
        raise MissingInputError(f"{path}: no such file")
    if target.is_dir():
        raise MissingInputError(f"{path}: is a directory, not a file")
    if not os.access(target, os.R_OK):
        raise MissingInputError(f"{path}: permission denied")


def resolve_format(path: str, override: InputFormat | None, head: bytes = b"") -> InputFormat:
    """The format to read ``path`` with: the override, the extension, else sniffed bytes."""
    if override is not None:
        return override
    if path != STDIO:
        by_extension = format_from_extension(path)
        if by_extension is not None:
            return by_extension
    return sniff_format(head)


TEXT_FORMATS: frozenset[str] = frozenset({"csv", "tsv"})


def read_table(path: str, *, input_format: InputFormat | None = None, typed: bool = False) -> Table:
    """Read a whole table from a file or from standard input (``-``).

    ``typed`` infers CSV/TSV column types (for typed outputs); by default they stay text.

    Raises MissingInputError (exit 66) for a missing or unreadable file and InputError
    (exit 65) for contents that cannot be parsed or hold no rows.
    """
    name = display_name(path)
    _check_exists(path)
    raw = _read_source_bytes(path)
    if raw.startswith(_GZIP_MAGIC):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise InputError(f"{name}: cannot decompress gzip data ({error})") from None
    fmt = resolve_format(path, input_format, raw[:4096])
    frame = _parse(raw, fmt, name, typed=typed)
    if frame.height == 0:
        raise InputError(f"{name}: no data rows")
    return Table(frame=frame, name=name, format=fmt)


def _parse(raw: bytes, fmt: InputFormat, name: str, *, typed: bool = False) -> pl.DataFrame:
    if not raw.strip():
        raise InputError(f"{name}: the input is empty")
    buffer = io.BytesIO(raw)
    try:
        if fmt in ("csv", "tsv"):
            separator = "\t" if fmt == "tsv" else ","
            if typed:
                try:
                    return pl.read_csv(
                        buffer, separator=separator, infer_schema_length=None, null_values=[""]
                    )
                except pl.exceptions.PolarsError:
                    buffer.seek(0)  # a column inference cannot type (e.g. ids >= 2**63): text
            return pl.read_csv(buffer, separator=separator, infer_schema=False, null_values=[""])
        if fmt == "parquet":
            return pl.read_parquet(buffer)
        if fmt == "arrow":
            if raw.startswith(_ARROW_FILE_MAGIC):
                return pl.read_ipc(buffer)
            return pl.read_ipc_stream(buffer)
        return pl.read_ndjson(buffer)
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        first_line = (
            str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        )
        raise InputError(f"{name}: cannot read as {fmt.upper()}: {first_line}") from None


def scan_table(
    path: str,
    *,
    input_format: InputFormat | None = None,
    typed: bool = False,
    text_columns: Sequence[str] = (),
) -> tuple[pl.LazyFrame, str]:
    """A lazy scan for streaming commands; returns the frame and the name for messages.

    Uncompressed files are scanned in place (memory does not grow with rows); standard input
    and gzip files are read first, since they cannot be scanned.
    """
    name = display_name(path)
    _check_exists(path)
    if path == STDIO or path.lower().endswith(".gz"):
        table = read_table(path, input_format=input_format, typed=typed)
        return table.frame.lazy(), table.format
    fmt = resolve_format(path, input_format, _peek(path))
    try:
        if fmt in ("csv", "tsv"):
            lazy = pl.scan_csv(
                path,
                separator="\t" if fmt == "tsv" else ",",
                infer_schema=typed,
                infer_schema_length=None,
                # ids stay text: inference would take 64-bit unsigned ids for Int64 and fail
                schema_overrides=dict.fromkeys(text_columns, pl.String) if typed else None,
            )
        elif fmt == "parquet":
            lazy = pl.scan_parquet(path)
        elif fmt == "arrow":
            lazy = pl.scan_ipc(path)
        else:
            lazy = pl.scan_ndjson(path)
        lazy.collect_schema()
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0]
        raise InputError(f"{name}: cannot read as {fmt.upper()}: {first_line}") from None
    return lazy, fmt


def _peek(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(4096)


# ---------------------------------------------------------------------------------- writing


def typed_output(path: str | None, override: InputFormat | None) -> bool:
    """Whether an output is a typed format (then CSV inputs are read with inferred types)."""
    if path is None:
        return False
    try:
        return output_format(path, override) not in TEXT_FORMATS
    except UsageError:
        return False


def output_format(path: str, override: InputFormat | None) -> InputFormat:
    """The format to write: the override, else the extension, else CSV (stdout's default)."""
    if override is not None:
        return override
    path = canonical_output(path)
    if path == STDIO:
        return "csv"
    by_extension = format_from_extension(path)
    if by_extension is None and is_stream(path):
        return "csv"  # a pipe, a device or a process substitution: like standard output
    if by_extension is None:
        raise UsageError(
            f"{path}: unknown output extension; use .csv, .tsv, .parquet, .arrow, .ndjson "
            "(optionally .gz for text) or --output-format"
        )
    return by_extension


def serialise(frame: pl.DataFrame, fmt: InputFormat, *, gzip_text: bool = False) -> bytes:
    """The bytes of ``frame`` in ``fmt`` (deterministic: same frame, same bytes)."""
    buffer = io.BytesIO()
    if fmt == "csv":
        frame.write_csv(buffer)
    elif fmt == "tsv":
        frame.write_csv(buffer, separator="\t")
    elif fmt == "parquet":
        frame.write_parquet(buffer, statistics=False)
    elif fmt == "arrow":
        frame.write_ipc(buffer)
    else:
        frame.write_ndjson(buffer)
    data = buffer.getvalue()
    if gzip_text:
        data = gzip.compress(data, mtime=0)
    return data


def write_table(
    frame: pl.DataFrame, path: str, *, output_format_override: InputFormat | None = None
) -> None:
    """Write a table atomically to ``path``, or to standard output for ``-``."""
    path = canonical_output(path)
    fmt = output_format(path, output_format_override)
    compress = path != STDIO and path.lower().endswith(".gz") and fmt in ("csv", "tsv", "ndjson")
    write_bytes(path, serialise(frame, fmt, gzip_text=compress))


def write_bytes(path: str, data: bytes) -> None:
    """Write bytes atomically to ``path`` (temporary file + rename), or to stdout for ``-``."""
    path = canonical_output(path)
    if path == STDIO:
        try:
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError(f"stdout: cannot write ({error.strerror or error})") from None
        return
    if is_stream(path):
        _write_stream(path, data)
        return
    with atomic_destination(path) as temporary:
        temporary.write_bytes(data)


def write_text(path: str, text: str) -> None:
    """Write text (UTF-8) atomically, or to standard output for ``-``."""
    write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def atomic_destination(path: str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``.

    On any failure the temporary file is removed and an existing ``path`` is left untouched.
    The new file gets the mode a plain ``open`` would give it (``0o666`` less the umask), or
    the mode of the file it replaces. A symbolic link is followed: its target is replaced.
    """
    target = Path(os.path.realpath(path))
    directory = target.parent
    if not directory.is_dir():
        raise OutputError(f"{path}: cannot write (no directory {str(Path(path).parent)!r})")
    try:
        handle, temporary_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=directory
        )
    except OSError as error:
        raise OutputError(f"{path}: cannot write ({error.strerror})") from None
    os.close(handle)
    temporary = Path(temporary_name)
    try:
        yield temporary
        _fsync(temporary)
        if target.is_dir():
            raise OutputError(f"{path}: cannot write (is a directory)")
        os.chmod(temporary, _file_mode(target))
        os.replace(temporary, target)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OutputError):
            raise
        raise OutputError(f"{path}: cannot write ({error.strerror or error})") from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _file_mode(target: Path) -> int:
    """The mode of the file being replaced, else 0o666 less the process umask."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def is_stream(path: str) -> bool:
    """A destination that is not a regular file: a FIFO, a device, a process substitution
    (``/dev/fd/N``). It is written directly, since it cannot be replaced by a rename."""
    try:
        return Path(path).exists() and not Path(path).is_file() and not Path(path).is_dir()
    except OSError:
        return False


def _write_stream(path: str, data: bytes) -> None:
    try:
        with open(path, "wb") as handle:
            handle.write(data)
    except OSError as error:
        raise OutputError(f"{path}: cannot write ({error.strerror or error})") from None


def check_destination(
    path: str | None, *, data_format: InputFormat | None = None, table: bool = False
) -> None:
    """Refuse an output before any work is done: an unknown extension (for tables), a missing
    directory, or a directory in place of a file."""
    if path is None or canonical_output(path) == STDIO or is_stream(path):
        return
    if table:
        output_format(path, data_format)
    target = Path(os.path.realpath(path))
    if target.is_dir():
        raise OutputError(f"{path}: cannot write (is a directory)")
    if not target.parent.is_dir():
        raise OutputError(f"{path}: cannot write (no directory {str(Path(path).parent)!r})")
    if not os.access(target.parent, os.W_OK):
        raise OutputError(f"{path}: cannot write (permission denied)")


def _fsync(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def require_distinct_outputs(paths: Sequence[str | None], inputs: Sequence[str | None]) -> None:
    """Refuse an output that would overwrite one of the inputs before it was read in full."""
    given = [p for p in inputs if p is not None]
    if sum(p == STDIO for p in given) > 1:
        raise UsageError("standard input ('-') can be read only once; give files for the others")
    resolved_inputs = {Path(p).resolve() for p in given if p != STDIO}
    seen: dict[Path, str] = {}
    for output in paths:
        if output is None or canonical_output(output) == STDIO or is_stream(output):
            continue
        resolved = Path(output).resolve()
        if resolved in resolved_inputs:
            raise UsageError(f"{output}: the output would overwrite an input; choose another path")
        if resolved in seen:
            raise UsageError(f"{output}: two outputs would be written to the same file")
        seen[resolved] = output


# --------------------------------------------------------------------- --on-invalid drop


def _score_validity(table: Table, column: str, kind: ScoreKind) -> Any:
    series = table.require_column(column, option="--score-col")
    if series.dtype == pl.String:
        values = series.str.strip_chars().cast(pl.Float64, strict=False)
    elif series.dtype == pl.Boolean or series.dtype.is_numeric():
        values = series.cast(pl.Float64)
    else:
        raise InputError(f"{table.name}: column '{column}' has type {series.dtype}, not numbers")
    array = values.fill_null(np.nan).to_numpy().astype(np.float64)
    if kind == "probability":
        return (array >= 0.0) & (array <= 1.0)
    return np.isfinite(array)


def _label_validity(table: Table, column: str, positive_label: str | None) -> Any:
    series = table.require_column(column, option="--label-col")
    _, is_valid = positive_label_expr(column, series.dtype, positive_label)
    if series.dtype == pl.String:
        is_valid = is_valid & (pl.col(column).str.strip_chars() != "")
    return series.to_frame(column).select(is_valid.fill_null(False))[:, 0].to_numpy()


def _weight_validity(table: Table, column: str) -> Any:
    series = table.require_column(column, option="--weight-col")
    if series.dtype == pl.String:
        values = series.str.strip_chars().cast(pl.Float64, strict=False)
    else:
        values = series.cast(pl.Float64)
    array = values.fill_null(np.nan).to_numpy().astype(np.float64)
    return np.isfinite(array) & (array >= 0.0)


def drop_invalid_rows(
    table: Table,
    *,
    score_cols: Sequence[str],
    score_kind: ScoreKind,
    label_col: str | None,
    positive_label: str | None,
    weight_col: str | None,
) -> tuple[Table, int]:
    """Drop rows whose score, label or weight would be refused; return the table and the count.

    Raises InputError when no valid row is left.
    """
    keep = np.ones(table.n_rows, dtype=bool)
    for column in score_cols:
        keep &= _score_validity(table, column, score_kind)
    if label_col is not None and table.has_column(label_col):
        keep &= _label_validity(table, label_col, positive_label)
    if weight_col is not None:
        keep &= _weight_validity(table, weight_col)
    dropped = int(table.n_rows - keep.sum())
    if dropped == table.n_rows:
        raise InputError(f"{table.name}: no valid rows left after dropping {dropped} invalid rows")
    if dropped == 0:
        return table, 0
    kept = table.frame.filter(pl.Series(keep))
    original = np.flatnonzero(keep)
    if table.row_numbers is not None:
        original = np.asarray(table.row_numbers)[original]
    return Table(frame=kept, name=table.name, format=table.format, row_numbers=original), dropped


# ------------------------------------------------------------------ streaming (resample)

ROW_INDEX = "__calib_row__"


def positive_label_expr(
    column: str, dtype: pl.DataType, positive_label: str | None
) -> tuple[pl.Expr, pl.Expr]:
    """Polars expressions (is positive, is a valid label) with the rules of
    :meth:`Table.labels`, for streaming where the whole column is never in memory."""
    col = pl.col(column)
    present = col.is_not_null()
    if positive_label is not None:
        if dtype.is_numeric():
            try:
                target = float(positive_label)
            except ValueError:
                raise InputError(
                    f"column '{column}' is numeric but --positive-label is {positive_label!r}"
                ) from None
            return col.cast(pl.Float64) == target, present
        text = col.cast(pl.String).str.strip_chars()
        numeric = _as_number(positive_label)
        if numeric is not None:
            # numeric text compares as numbers ("1.0" matches "1"); other text as text
            as_number = text.cast(pl.Float64, strict=False)
            matches = pl.when(as_number.is_not_null()).then(as_number == numeric)
            return matches.otherwise(text == positive_label.strip()), present & (text != "")
        return text == positive_label.strip(), present & (text != "")
    if dtype == pl.Boolean:
        return col, present
    if dtype.is_numeric():
        value = col.cast(pl.Float64)
        return value == 1.0, present & ((value == 0.0) | (value == 1.0))
    text = col.cast(pl.String).str.strip_chars().str.to_lowercase()
    return text.is_in(list(_TRUE_TEXT)), text.is_in(list(_TRUE_TEXT | _FALSE_TEXT))


@dataclass(frozen=True)
class ClassCounts:
    """Rows and positives of one stratum (``None`` when there are no strata)."""

    stratum: str | None
    rows: int
    positives: int

    @property
    def negatives(self) -> int:
        return self.rows - self.positives


def key_kind(lazy: pl.LazyFrame, key_col: str | None, *, name: str) -> str:
    """How keys are hashed: ``row`` (no key column), ``integer`` or ``string``.

    A key column is hashed as integers when it holds integers, or text in which every value is
    an integer (so the same ids read from CSV and from Parquet keep the same rows); otherwise
    as UTF-8 strings. Missing keys and floating-point keys are refused.
    """
    if key_col is None:
        return "row"
    schema = lazy.collect_schema()
    if key_col not in schema:
        raise InputError(f"{name}: no column '{key_col}' (set --key-col)")
    dtype = schema[key_col]
    if dtype.is_float() or dtype == pl.Boolean:
        raise InputError(
            f"{name}: column '{key_col}' is {dtype}; --key-col needs integer or text ids"
        )
    col = pl.col(key_col)
    checks = [col.is_null().sum().alias("missing")]
    if dtype == pl.String:
        checks.append(
            (_text_as_uint64(col).is_null() & col.is_not_null()).sum().alias("not_integer")
        )
    elif not dtype.is_integer():
        raise InputError(f"{name}: column '{key_col}' has type {dtype}; use integer or text ids")
    found = _collect(lambda: lazy.select(checks).collect(engine="streaming"), name)
    if found["missing"][0]:
        raise InputError(f"{name}: column '{key_col}' has {found['missing'][0]} missing keys")
    if dtype == pl.String and found["not_integer"][0]:
        return "string"
    return "integer"


def class_counts(
    lazy: pl.LazyFrame,
    *,
    name: str,
    label_col: str,
    positive_label: str | None,
    strata_col: str | None,
) -> list[ClassCounts]:
    """One streaming pass: rows and positives per stratum, refusing invalid labels or strata
    with the usual one-line message (count and first row)."""
    schema = lazy.collect_schema()
    for column, option in ((label_col, "--label-col"), (strata_col, "--strata-col")):
        if column is not None and column not in schema:
            shown = ", ".join(list(schema)[:20])
            raise InputError(f"{name}: no column '{column}' (set {option}); columns are: {shown}")
    _, is_valid = positive_label_expr(label_col, schema[label_col], positive_label)
    invalid = (
        lazy.with_row_index(ROW_INDEX)
        .filter(~is_valid.fill_null(False))
        .select(
            pl.len().alias("count"),
            pl.col(ROW_INDEX).first().alias("row"),
            pl.col(label_col).cast(pl.String).first().alias("value"),
        )
    )
    counts = _counts_query(lazy, label_col, schema[label_col], positive_label, strata_col)
    # with --positive-label, a label column takes two values (as Table.labels requires)
    text = pl.col(label_col).cast(pl.String).str.strip_chars().drop_nulls()
    distinct = lazy.select(
        text.n_unique().alias("count"), text.unique().sort().head(5).implode().alias("shown")
    )
    queries = [invalid, counts] + ([distinct] if positive_label is not None else [])
    bad, grouped, *labels_seen = _collect(lambda: pl.collect_all(queries, engine="streaming"), name)
    if bad["count"][0]:
        count, row, value = bad["count"][0], bad["row"][0] + 1, bad["value"][0]
        what = (
            "value that is not a valid label" if count == 1 else "values that are not valid labels"
        )
        hint = "; name the positive value with --positive-label" if positive_label is None else ""
        shown = "empty" if value is None else repr(value)
        raise InputError(
            f"{name}: column '{label_col}' has {count} {what} (first at row {row}: {shown}){hint}"
        )
    if labels_seen and labels_seen[0]["count"][0] > 2:
        count = labels_seen[0]["count"][0]
        shown = ", ".join(repr(v) for v in labels_seen[0]["shown"][0].to_list())
        raise InputError(
            f"{name}: column '{label_col}' has {count} distinct values ({shown}, ...); "
            "labels must take two values"
        )
    if grouped.height == 0:
        raise InputError(f"{name}: no data rows")
    if strata_col and grouped["stratum"].is_null().any():
        raise InputError(f"{name}: column '{strata_col}' has missing values")
    return _as_class_counts(grouped, strata_col)


def _counts_query(
    lazy: pl.LazyFrame,
    label_col: str,
    label_dtype: pl.DataType,
    positive_label: str | None,
    strata_col: str | None,
) -> pl.LazyFrame:
    is_positive, _ = positive_label_expr(label_col, label_dtype, positive_label)
    group = pl.col(strata_col).cast(pl.String) if strata_col else pl.lit("", dtype=pl.String)
    return (
        lazy.group_by(group.alias("stratum"))
        .agg(pl.len().alias("rows"), is_positive.sum().alias("positives"))
        .sort("stratum", nulls_last=True)
    )


def _as_class_counts(grouped: pl.DataFrame, strata_col: str | None) -> list[ClassCounts]:
    return [
        ClassCounts(
            stratum=row["stratum"] if strata_col else None,
            rows=int(row["rows"]),
            positives=int(row["positives"] or 0),
        )
        for row in grouped.iter_rows(named=True)
    ]


def _text_as_uint64(text: pl.Expr) -> pl.Expr:
    """Integer text as its 64 bits: Int64 values in two's complement (-1 is 2**64 - 1), and
    values up to 2**64 - 1 that only UInt64 holds; null where the text is not an integer."""
    stripped = text.str.strip_chars()
    signed = stripped.cast(pl.Int64, strict=False).reinterpret(signed=False)
    return pl.coalesce(signed, stripped.cast(pl.UInt64, strict=False))


def _key_hash_expr(
    key_col: str | None, kind: str, seed: int, key_dtype: pl.DataType | None = None
) -> pl.Expr:
    """The per-row ``hash64(seed, key)`` of :mod:`calib_cli.core.sampling`, computed batch by
    batch inside a streaming query (the key rules are those of :func:`key_kind`)."""
    from calib_cli.core.sampling import hash_string_keys, hash_uint64_keys

    def hash_integers(series: pl.Series) -> pl.Series:
        if series.dtype.is_unsigned_integer():
            keys = series.cast(pl.UInt64).to_numpy().astype(np.uint64)
        else:  # two's complement: -1 is 2**64 - 1, as the specification says
            keys = series.cast(pl.Int64).to_numpy().astype(np.int64).view(np.uint64)
        return pl.Series(hash_uint64_keys(keys, seed=seed), dtype=pl.UInt64)

    def hash_text(series: pl.Series) -> pl.Series:
        text = series.cast(pl.String)
        lengths = text.str.len_bytes().cast(pl.Int64).to_numpy()
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        data = np.frombuffer(text.str.join("").item().encode("utf-8"), dtype=np.uint8)
        return pl.Series(hash_string_keys(offsets, data, seed=seed), dtype=pl.UInt64)

    if key_col is None or kind == "row":
        return pl.col(ROW_INDEX).map_batches(hash_integers, pl.UInt64, is_elementwise=True)
    if kind == "integer":
        key = pl.col(key_col)
        if key_dtype is not None and key_dtype.is_integer():
            return key.map_batches(hash_integers, pl.UInt64, is_elementwise=True)
        # Text ids are stripped and parsed ("007" is 7), so CSV and Parquet keep the same rows.
        return _text_as_uint64(key.cast(pl.String)).map_batches(
            hash_integers, pl.UInt64, is_elementwise=True
        )
    return pl.col(key_col).map_batches(hash_text, pl.UInt64, is_elementwise=True)


def _stratum_lookup(
    strata_col: str | None, values: Mapping[str, Any], dtype: pl.DataType | type[pl.DataType]
) -> pl.Expr:
    """Per-row value looked up by the row's stratum (one value when there are no strata)."""
    if strata_col is None:
        (only,) = values.values()
        return pl.lit(only, dtype=dtype)
    return pl.col(strata_col).cast(pl.String).replace_strict(dict(values), return_dtype=dtype)


def sample_rows(
    lazy: pl.LazyFrame,
    *,
    label_col: str,
    label_dtype: pl.DataType,
    positive_label: str | None,
    strata_col: str | None,
    key_col: str | None,
    key_hash_kind: str,
    seed: int,
    thresholds: Mapping[str, tuple[int, int]],
    weights: Mapping[str, tuple[float, float]] | None,
    weight_col_out: str | None,
) -> pl.LazyFrame:
    """The rows kept by the hash rule: ``hash64(seed, key) < threshold`` of the row's class and
    stratum (``thresholds``: stratum -> (negative, positive) as integers below 2**64; a
    threshold of 2**64 - 1 keeps every row). With ``weight_col_out``, appends the importance
    weight of each kept row (``weights``: stratum -> (negative, positive))."""
    is_positive, _ = positive_label_expr(label_col, label_dtype, positive_label)
    key_dtype = lazy.collect_schema()[key_col] if key_col is not None else None
    negative = _stratum_lookup(strata_col, {k: v[0] for k, v in thresholds.items()}, pl.UInt64)
    positive = _stratum_lookup(strata_col, {k: v[1] for k, v in thresholds.items()}, pl.UInt64)
    threshold = pl.when(is_positive).then(positive).otherwise(negative)
    keep_all = threshold == pl.lit(2**64 - 1, dtype=pl.UInt64)
    kept = (
        lazy.with_row_index(ROW_INDEX)
        .filter(keep_all | (_key_hash_expr(key_col, key_hash_kind, seed, key_dtype) < threshold))
        .drop(ROW_INDEX)
    )
    if weight_col_out is not None and weights is not None:
        neg_w = _stratum_lookup(strata_col, {k: v[0] for k, v in weights.items()}, pl.Float64)
        pos_w = _stratum_lookup(strata_col, {k: v[1] for k, v in weights.items()}, pl.Float64)
        kept = kept.with_columns(
            pl.when(is_positive).then(pos_w).otherwise(neg_w).alias(weight_col_out)
        )
    return kept


def sink_table(
    lazy: pl.LazyFrame, path: str, *, output_format_override: InputFormat | None
) -> None:
    """Stream a lazy query to ``path`` atomically (or to stdout via a temporary file), so
    memory does not grow with rows and a failure leaves no partial file."""
    path = canonical_output(path)
    fmt = output_format(path, output_format_override)
    compress = path != STDIO and path.lower().endswith(".gz") and fmt in ("csv", "tsv", "ndjson")
    if path == STDIO or is_stream(path):
        with tempfile.TemporaryDirectory() as scratch:
            temporary = Path(scratch) / "out"
            _sink(lazy, temporary, fmt, compress=compress)
            _copy_out(temporary, path)
        return
    with atomic_destination(path) as temporary:
        _sink(lazy, temporary, fmt, compress=compress)


def _copy_out(source: Path, path: str) -> None:
    """Copy a finished temporary file to stdout or a stream, in chunks."""
    try:
        if path == STDIO:
            sys.stdout.flush()
            destination = sys.stdout.buffer
            with open(source, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    destination.write(chunk)
            destination.flush()
        else:
            with open(source, "rb") as handle, open(path, "wb") as out:
                while chunk := handle.read(1 << 20):
                    out.write(chunk)
    except BrokenPipeError:
        raise
    except OSError as error:
        name = "stdout" if path == STDIO else path
        raise OutputError(f"{name}: cannot write ({error.strerror or error})") from None


def _sink(lazy: pl.LazyFrame, path: Path, fmt: InputFormat, *, compress: bool) -> None:
    try:
        if fmt in ("csv", "tsv"):
            lazy.sink_csv(
                path,
                separator="\t" if fmt == "tsv" else ",",
                check_extension=False,
                compression="gzip" if compress else "uncompressed",
            )
        elif fmt == "parquet":
            lazy.sink_parquet(path, statistics=False)
        elif fmt == "arrow":
            lazy.sink_ipc(path)
        elif compress:  # Polars cannot gzip NDJSON while sinking: sink, then compress
            with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
                plain = Path(scratch) / "plain.ndjson"
                lazy.sink_ndjson(plain)
                with (
                    open(plain, "rb") as source,
                    open(path, "wb") as raw,
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as target,
                ):
                    while chunk := source.read(1 << 20):
                        target.write(chunk)
        else:
            lazy.sink_ndjson(path)
    except pl.exceptions.PolarsError as error:
        first_line = str(error).strip().splitlines()[0]
        raise InputError(f"cannot stream the input: {first_line}") from None


def counts_by_stratum(
    lazy: pl.LazyFrame,
    *,
    label_col: str,
    label_dtype: pl.DataType,
    positive_label: str | None,
    strata_col: str | None,
) -> list[ClassCounts]:
    """Rows and positives per stratum of a (validated) lazy table, in one streaming pass."""
    query = _counts_query(lazy, label_col, label_dtype, positive_label, strata_col)
    return _as_class_counts(
        _collect(lambda: query.collect(engine="streaming"), "input"), strata_col
    )


def _collect(run: Any, name: str) -> Any:
    """Run a Polars query; a failure of the data (a value that cannot be cast, say) becomes
    an InputError naming the file, not an internal error."""
    try:
        return run()
    except pl.exceptions.PolarsError as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else "error"
        raise InputError(f"{name}: cannot read the input: {first_line}") from None
