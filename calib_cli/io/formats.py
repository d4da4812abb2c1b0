"""File formats and paths: extensions, sniffing, standard input and output."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from calib_cli.errors import InputError, UsageError
from calib_cli.types import InputFormat

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

GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = b"PAR1"
ARROW_FILE_MAGIC = b"ARROW1"
_ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"


_STDOUT_ALIASES = frozenset({"/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"})


def canonical_output(path: str) -> str:
    """``-`` for the names of standard output (so ``-o /dev/stdout > file`` appends to the
    shell's file instead of renaming over it), else the path as given."""
    return STDIO if path in _STDOUT_ALIASES else path


def display_name(path: str, *, output: bool = False) -> str:
    """The name used for a file in messages: ``stdin`` for ``-`` (``stdout`` for an
    ``output``), else the path as given.

    >>> display_name("-"), display_name("-", output=True), display_name("a.csv")
    ('stdin', 'stdout', 'a.csv')
    """
    if path == STDIO:
        return "stdout" if output else "stdin"
    return path


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
    if head.startswith(ARROW_FILE_MAGIC) or head.startswith(_ARROW_STREAM_MAGIC):
        return "arrow"
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        return "ndjson"
    first_line = head.split(b"\n", 1)[0]
    if b"\t" in first_line and b"," not in first_line:
        return "tsv"
    return "csv"


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


def typed_output(path: str | None, override: InputFormat | None) -> bool:
    """Whether an output is a typed format (then CSV inputs are read with inferred types)."""
    if path is None:
        return False
    try:
        return output_format(path, override) not in TEXT_FORMATS
    except UsageError:
        return False


def output_format(path: str, override: InputFormat | None) -> InputFormat:
    """The format to write: the override, else the extension, else CSV (stdout's default).

    ``.gz`` compresses text formats only: a Parquet or Arrow file named ``.gz`` would not be
    gzip (``zcat`` fails on it), so that name is refused.
    """
    path = canonical_output(path)
    chosen = override if override is not None else _format_of_output_name(path)
    if path != STDIO and _split_gz(path)[1] and chosen not in ("csv", "tsv", "ndjson"):
        raise UsageError(
            f"{path}: .gz compresses text outputs (csv, tsv, ndjson), not {chosen}: drop .gz "
            "or write a text format"
        )
    return chosen


def _format_of_output_name(path: str) -> InputFormat:
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


def is_stream(path: str) -> bool:
    """A destination that is not a regular file: a FIFO, a device, a process substitution
    (``/dev/fd/N``). It is written directly, since it cannot be replaced by a rename."""
    try:
        return Path(path).exists() and not Path(path).is_file() and not Path(path).is_dir()
    except OSError:
        return False


def check_text_columns(schema: Mapping[str, pl.DataType], fmt: InputFormat) -> None:
    """Refuse, naming them, columns CSV and TSV cannot hold (lists, arrays, structs), before a
    table is written in those formats (Parquet, Arrow and NDJSON hold them)."""
    if fmt not in ("csv", "tsv"):
        return
    nested = [name for name, dtype in schema.items() if dtype.is_nested() or dtype == pl.Object]
    if nested:
        listed = ", ".join(f"'{name}'" for name in nested[:5]) + (
            ", ..." if len(nested) > 5 else ""
        )
        raise InputError(
            f"column(s) {listed} hold nested values, which {fmt.upper()} cannot write; write "
            "Parquet, Arrow or NDJSON (-o out.parquet, or --output-format parquet), "
            "or drop the column(s) first"
        )
