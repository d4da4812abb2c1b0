"""Reading a whole table from a file or standard input."""

from __future__ import annotations

import gzip
import io
import os
import sys
from pathlib import Path

import polars as pl

from calib_cli.errors import InputError, MissingInputError
from calib_cli.interrupts import wait_if_interrupted
from calib_cli.io.formats import ARROW_FILE_MAGIC, GZIP_MAGIC, STDIO, display_name, resolve_format
from calib_cli.io.table import Table
from calib_cli.types import InputFormat

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


def _read_source_bytes(path: str) -> bytes:
    try:
        if path == STDIO:
            return read_stdin()
        return Path(path).read_bytes()
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
    raw = _read_source_bytes(path)
    if raw.startswith(GZIP_MAGIC):
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
            if raw.startswith(ARROW_FILE_MAGIC):
                return pl.read_ipc(buffer)
            return pl.read_ipc_stream(buffer)
        return pl.read_ndjson(buffer)
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        first_line = (
            str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        )
        raise InputError(f"{name}: cannot read as {fmt.upper()}: {first_line}") from None
