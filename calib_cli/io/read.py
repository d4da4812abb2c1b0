"""Reading a whole table from a file or standard input."""

from __future__ import annotations

import contextlib
import gzip
import io
import mmap
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TypeVar

import polars as pl

from calib_cli.errors import InputError, MissingInputError
from calib_cli.interrupts import wait_if_interrupted
from calib_cli.io.dialect import (
    checked_header,
    current_dialect,
    parse_error_hint,
    refuse_one_column,
)
from calib_cli.io.formats import (
    ARROW_FILE_MAGIC,
    GZIP_MAGIC,
    STDIO,
    checked_format,
    display_name,
)
from calib_cli.io.spool import SNIFF_BYTES, readable
from calib_cli.io.table import Table
from calib_cli.types import InputFormat

#: A table or a lazy scan of one.
FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)

# ---------------------------------------------------------------------------------- reading


STDIN_CHUNK = 1 << 20


def read_stdin() -> bytes:
    """Standard input to its end, in chunks (each read returns to Python, so a signal is acted
    on while a pipe stays open). An interrupt that arrived with the end of input wins: when
    the upstream process dies of the same Ctrl-C, the input it left is cut short."""
    stream = sys.stdin.buffer
    read = getattr(stream, "read1", stream.read)  # read1: what has arrived, up to a chunk
    chunks: list[bytes] = []
    while chunk := read(STDIN_CHUNK):
        chunks.append(chunk)
    wait_if_interrupted()
    return b"".join(chunks)


def _read_source_bytes(path: str, *, size: int = -1) -> bytes:
    """The bytes of ``path`` (a file's first ``size`` only, when given; standard input, all)."""
    try:
        if path == STDIO:
            return read_stdin()
        with open(readable(path), "rb") as handle:
            return handle.read(size)
    except FileNotFoundError:
        raise MissingInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise MissingInputError(f"{path}: is a directory, not a file") from None
    except PermissionError:
        raise MissingInputError(f"{path}: permission denied") from None
    except OSError as error:
        raise MissingInputError(f"{display_name(path)}: cannot read ({error.strerror})") from None


def check_exists(path: str) -> None:
    if path == STDIO:
        return
    target = Path(path)
    if not target.exists():
        raise MissingInputError(f"{path}: no such file")
    if target.is_dir():
        raise MissingInputError(f"{path}: is a directory, not a file")
    if not os.access(target, os.R_OK):
        raise MissingInputError(f"{path}: permission denied")


def read_table(path: str, *, input_format: InputFormat | None = None, typed: bool = False) -> Table:
    """Read a whole table from a file or from standard input (``-``).

    ``typed`` infers CSV/TSV column types (for typed outputs); by default they stay text.

    Raises MissingInputError (exit 66) for a missing or unreadable file and InputError
    (exit 65) for contents that cannot be parsed or hold no rows.
    """
    name = display_name(path)
    check_exists(path)
    if path == STDIO:
        raw = _read_source_bytes(path)
        fmt = checked_format(path, input_format, raw[:SNIFF_BYTES], name=name)
    else:  # checked before the file is read, from its first bytes (it may be large); a
        # pipe's format is its copy's, as for the streaming engine (spool.readable)
        head = _read_source_bytes(path, size=SNIFF_BYTES)
        fmt = checked_format(readable(path), input_format, head, name=name)
        raw = _read_source_bytes(path)
    if raw.startswith(GZIP_MAGIC):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise InputError(f"{name}: cannot decompress gzip data ({error})") from None
    frame = _parse(raw, fmt, name, typed=typed)
    if frame.height == 0:
        raise InputError(f"{name}: no data rows")
    return Table(frame=frame, name=name, format=fmt)


def without_blank_lines(frame: FrameT) -> FrameT:
    r"""A CSV or TSV table without the rows that hold no value in any column: blank lines
    (the trailing one an editor or ``cat a.csv b.csv`` leaves, a CRLF file's ``\r\n``) and
    lines of separators alone (``,,``), which the parser reads as rows of nulls. They are not
    rows, as for pandas and R: every command failed on them ("column 'score' has 1 value
    missing"), naming a value the file does not show. "first at row N" counts the rows kept.
    Applied where :func:`holds_blank_lines` finds one (the filter reads every column)."""
    return frame.filter(~pl.all_horizontal(pl.all().is_null()))


def holds_blank_lines(data: bytes | mmap.mmap, separator: bytes, n_columns: int) -> bool:
    r"""Whether a CSV or TSV text of ``n_columns`` may hold a line without a value in any
    column (:func:`without_blank_lines`): an empty line (``\n\n``, ``\n\r\n``) or one of
    separators alone. One regular-expression search (0.3 s on 464 MB), so that a file
    without them, the common case, is read without the filter, which reads every column
    (11% more time on a file of 8 columns of which a command uses 2, 53% on 42 columns). Both
    engines ask it of the same bytes, so they keep the same rows. A quoted empty line inside a
    value is a false alarm, which only costs the filter's time.

    >>> holds_blank_lines(b"a,b\n1,2\n", b",", 2), holds_blank_lines(b"a,b\n1,2\n\n", b",", 2)
    (False, True)
    >>> holds_blank_lines(b"a,b\n,\r\n1,2", b",", 2), holds_blank_lines(b"a,b\n,2\n", b",", 2)
    (True, False)
    >>> holds_blank_lines(b"a,b,c\n1,2,3\n,,", b",", 3)
    True
    """
    separators = re.escape(separator * max(n_columns - 1, 0))
    if re.search(rb"\n(?:" + separators + rb")?\r?\n", data) is not None:
        return True
    tail = data[max(len(data) - 4096, 0) :]
    last = tail[tail.rfind(b"\n") + 1 :]  # a last line of separators without a newline
    return n_columns > 1 and last.rstrip(b"\r") == separator * (n_columns - 1)


def _parse(raw: bytes, fmt: InputFormat, name: str, *, typed: bool = False) -> pl.DataFrame:
    if not raw.strip():
        raise InputError(f"{name}: the input is empty")
    buffer = io.BytesIO(raw)
    try:
        if fmt in ("csv", "tsv"):
            separator = current_dialect().read_separator(fmt)
            header = raw.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", errors="replace")
            refuse_one_column(header.split(separator), name)
            text = pl.read_csv(buffer, separator=separator, infer_schema=False, null_values=[""])
            text = text.rename(checked_header(text.columns, name))
            if holds_blank_lines(raw, separator.encode(), text.width):
                text = without_blank_lines(text)
            if not typed:
                return text
            return text.with_columns(typed_columns(exact_types(text.lazy())))
        if fmt == "parquet":
            return pl.read_parquet(buffer)
        if fmt == "arrow":
            if raw.startswith(ARROW_FILE_MAGIC):
                return pl.read_ipc(buffer)
            return pl.read_ipc_stream(buffer)
        return pl.read_ndjson(buffer)
    except InputError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        first_line = (
            str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        )
        hint = parse_error_hint(first_line)
        raise InputError(f"{name}: cannot read as {fmt.upper()}: {first_line}{hint}") from None


# ------------------------------------------------------------------ types of text columns


#: The columns the running command reads as numbers (its scores and weights): in a typed
#: output they are numbers whenever every value reads as one (:func:`exact_types`).
_NUMBER_COLUMNS: ContextVar[frozenset[str]] = ContextVar(
    "calib_number_columns", default=frozenset()
)


@contextlib.contextmanager
def reading_numbers(columns: Iterable[str | None]) -> Iterator[None]:
    """Inside the block, ``columns`` (None left out) are numbers in typed outputs."""
    token = _NUMBER_COLUMNS.set(frozenset(c for c in columns if c is not None))
    try:
        yield
    finally:
        _NUMBER_COLUMNS.reset(token)


#: The columns the running command reads as identities (groups, batches, strata, keys: see
#: :mod:`calib_cli.io.identity`): in a typed output they never become floating-point numbers.
_IDENTITY_COLUMNS: ContextVar[frozenset[str]] = ContextVar(
    "calib_identity_columns", default=frozenset()
)


@contextlib.contextmanager
def reading_identities(columns: Iterable[str | None]) -> Iterator[None]:
    """Inside the block, ``columns`` (None left out) name rows (``--by``, ``--batch-col``,
    ``--strata-col``, ``--key-col``): a CSV read for a typed output keeps each as text, or
    makes it integers when every value is an integer's text, never floating-point numbers,
    which would make ``"1"`` and ``"1.0"`` one group and name the stratum ``"2"`` ``"2.0"``
    (:func:`exact_types`)."""
    token = _IDENTITY_COLUMNS.set(frozenset(c for c in columns if c is not None))
    try:
        yield
    finally:
        _IDENTITY_COLUMNS.reset(token)


#: The largest integer magnitude below which every integer is exactly a double.
_EXACT_INT_IN_DOUBLE = 2**53


def exact_types(text: pl.LazyFrame, *, text_columns: Sequence[str] = ()) -> dict[str, pl.DataType]:
    """The type of each column of a CSV read as text, for typed outputs (Parquet, Arrow,
    NDJSON): Int64, Float64 or Boolean when every value reads as one and comes back as the
    same text, else String, so that pass-through values are kept exactly (``00123``,
    ``1.50``, ``+3``, ``1e3``, `` 7`` stay text), and integers become Float64 only where a
    double holds them exactly (up to 2**53: an id ``9007199254740993`` beside a ``0.5`` keeps
    its column as text). ``text_columns`` stay text in any case; the columns read as
    identities (:func:`reading_identities`) are Int64, Boolean or text, never Float64. The
    columns the command reads as numbers (:func:`reading_numbers`: a score written
    ``2.16301e-05`` comes back as ``2.16301e-5``) are Float64 whenever every value reads as a
    number: they are numbers to calib, and to the engine that reads the output next. One
    streaming pass over ``text``.

    >>> frame = pl.LazyFrame({"id": ["00123", "00124"], "n": ["7", "12"],
    ...                       "x": ["0.5", "1"], "y": ["1.50", "2"], "b": ["true", None]})
    >>> {name: str(dtype) for name, dtype in exact_types(frame).items()}
    {'id': 'String', 'n': 'Int64', 'x': 'Float64', 'y': 'String', 'b': 'Boolean'}
    >>> with reading_identities(["x"]):
    ...     str(exact_types(frame)["x"])
    'String'
    """
    names = text.collect_schema().names()
    if not names:
        return {}
    checks: list[pl.Expr] = []
    for index, name in enumerate(names):
        column = pl.col(name)
        missing = column.is_null()
        number = _decimal_point(column)  # "0,5" is 0.5 under --decimal-comma
        as_int = column.cast(pl.Int64, strict=False)
        int_exact = as_int.cast(pl.String) == column
        # an integer is a double exactly up to 2**53: beyond, "9007199254740993" would come
        # back as 9007199254740992.0
        int_as_float = int_exact & as_int.is_between(-_EXACT_INT_IN_DOUBLE, _EXACT_INT_IN_DOUBLE)
        float_exact = (
            number.cast(pl.Float64, strict=False).cast(pl.String) == number
        ) | int_as_float
        checks += [
            (missing | int_exact.fill_null(False)).all().alias(f"{index}:int"),
            (missing | float_exact.fill_null(False)).all().alias(f"{index}:float"),
            (missing | column.is_in(["true", "false"])).all().alias(f"{index}:bool"),
            (missing | number.cast(pl.Float64, strict=False).is_not_null())
            .all()
            .alias(f"{index}:number"),
            missing.all().alias(f"{index}:empty"),
        ]
    flags = text.select(checks).collect(engine="streaming").row(0, named=True)
    types: dict[str, pl.DataType] = {}
    numbers, identities = _NUMBER_COLUMNS.get(), _IDENTITY_COLUMNS.get()
    for index, name in enumerate(names):
        dtype: pl.DataType = pl.String()
        if name in text_columns or flags[f"{index}:empty"]:
            pass
        elif flags[f"{index}:int"]:
            dtype = pl.Int64()
        elif name in identities:  # "1" and "1.0" would be one value, "2" become "2.0"
            if flags[f"{index}:bool"]:
                dtype = pl.Boolean()
        elif flags[f"{index}:float"] or (name in numbers and flags[f"{index}:number"]):
            dtype = pl.Float64()
        elif flags[f"{index}:bool"]:
            dtype = pl.Boolean()
        types[name] = dtype
    return types


def typed_columns(types: dict[str, pl.DataType]) -> list[pl.Expr]:
    """The expressions that turn text columns into the types of :func:`exact_types`."""
    exprs: list[pl.Expr] = []
    for name, dtype in types.items():
        if dtype == pl.Boolean:
            exprs.append(pl.col(name) == "true")
        elif dtype == pl.Float64:
            exprs.append(_decimal_point(pl.col(name)).cast(dtype))
        elif dtype != pl.String:
            exprs.append(pl.col(name).cast(dtype))
    return exprs


def _decimal_point(text: pl.Expr) -> pl.Expr:
    """Text with its decimal comma made a point under ``--decimal-comma`` (not stripped, so
    that a value with spaces still fails the round trip and stays text)."""
    if current_dialect().decimal_comma:
        return text.str.replace(",", ".", literal=True)
    return text
