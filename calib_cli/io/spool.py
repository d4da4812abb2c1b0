"""Inputs that can be read only once: named pipes, process substitution (``<(zcat x.csv.gz)``)
and devices are copied to a temporary file the first time they are read, and every later read
(the columns, the row count, the scan itself) reads the copy.

A command reads a file several times before and during its work (its columns to check the
options, its size to choose the engine, then the rows, twice for some), and a pipe gives its
bytes once: read directly, the second read started in the middle of the data. The copy is made
in chunks (memory stays bounded, the streaming engine scans it as any file), is named after
the format its first bytes show (so that it is read as such), and is removed when the command
ends, or by the interrupt handler if it is interrupted. Standard input (``-``) keeps its own
route (read into memory once).
"""

from __future__ import annotations

import atexit
import contextlib
import tempfile
import threading
from pathlib import Path

from calib_cli import interrupts
from calib_cli.errors import MissingInputError
from calib_cli.io.formats import (
    GZIP_MAGIC,
    STDIO,
    SUFFIXES,
    display_name,
    is_stream,
    sniff_format,
)

#: Bytes copied per read (each read returns to Python, so an interrupt is acted on).
SPOOL_CHUNK = 1 << 20
#: Bytes the format is sniffed from (waited for, unless the pipe ends first).
SNIFF_BYTES = 4096

_lock = threading.Lock()
_copies: dict[str, Path] = {}


def readable(path: str) -> str:
    """The path to read ``path`` from: itself for a file (and standard input), else, for a
    pipe (a FIFO, a device, ``/dev/fd/N``: what :func:`~calib_cli.io.formats.is_stream` tells
    apart for outputs too), the temporary copy made on the first call."""
    if path == STDIO or not is_stream(path):
        return path
    with _lock:
        copy = _copies.get(path)
        if copy is None:
            copy = _spool(path)
            _copies[path] = copy
    return str(copy)


def _spool(path: str) -> Path:
    """Copy the pipe ``path`` to a new temporary file in chunks; its suffix is the format its
    first bytes show (``.gz`` for gzip, read as such)."""
    directory = Path(tempfile.gettempdir())
    copy: Path | None = None
    try:
        with open(path, "rb") as source:
            head = source.read1(SPOOL_CHUNK)
            while len(head) < SNIFF_BYTES and (more := source.read1(SPOOL_CHUNK)):
                head += more  # a slow writer's first bytes may come a few at a time
            suffix = ".gz" if head.startswith(GZIP_MAGIC) else SUFFIXES[sniff_format(head)]
            copy = interrupts.new_temporary_file(directory, prefix=".calib-pipe-", suffix=suffix)
            with open(copy, "wb") as out:
                out.write(head)
                while chunk := source.read1(SPOOL_CHUNK):
                    out.write(chunk)
    except OSError as error:
        if copy is not None:
            interrupts.remove_temporary(copy)
        if isinstance(error, PermissionError):
            raise MissingInputError(f"{path}: permission denied") from None
        raise MissingInputError(
            f"{display_name(path)}: cannot copy the pipe to {directory} to read it more than "
            f"once ({error.strerror}; set TMPDIR to a directory with room)"
        ) from None
    return copy


@atexit.register
def remove_copies() -> None:
    """Remove the copies (at exit; an interrupt removes them with the other temporaries)."""
    with _lock:
        copies = list(_copies.values())
        _copies.clear()
    for copy in copies:
        with contextlib.suppress(OSError):
            interrupts.remove_temporary(copy)
