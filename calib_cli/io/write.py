"""Writing tables and bytes atomically (temporary file + rename), or to standard output.

Every temporary file an atomic write holds open is registered in :mod:`calib_cli.interrupts`,
so that an interrupted run can remove them all before it ends, and every commit (a rename over
the destination, a write to standard output) passes through :func:`committing`, which an
interrupt closes for good.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import polars as pl

from calib_cli.errors import OutputError, UsageError
from calib_cli.interrupts import (
    committing,
    new_temporary_file,
    remove_temporary,
    unregister_temporary,
)
from calib_cli.io.dialect import current_dialect
from calib_cli.io.formats import (
    STDIO,
    canonical_output,
    check_text_columns,
    is_stream,
    output_format,
)
from calib_cli.types import InputFormat


def serialise(frame: pl.DataFrame, fmt: InputFormat, *, gzip_text: bool = False) -> bytes:
    """The bytes of ``frame`` in ``fmt`` (deterministic: same frame, same bytes)."""
    buffer = io.BytesIO()
    if fmt in ("csv", "tsv"):  # in the input's dialect (io.dialect)
        dialect = current_dialect()
        frame.write_csv(
            buffer, separator=dialect.write_separator(fmt), decimal_comma=dialect.decimal_comma
        )
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


def write_all(stream: BinaryIO, data: bytes | memoryview) -> None:
    """Write every byte of ``data`` to ``stream``. A pipe whose reader goes away during a
    large write can take part of it and report no error (the write returns a short count);
    writing the rest then raises BrokenPipeError, so a closed pipe is never taken for a
    complete write."""
    view = memoryview(data).cast("B")
    while view.nbytes:
        written = stream.write(view)
        if not written:
            raise OSError(errno.EIO, "the stream took no bytes")
        view = view[written:]


def write_table(
    frame: pl.DataFrame, path: str, *, output_format_override: InputFormat | None = None
) -> None:
    """Write a table atomically to ``path``, or to standard output for ``-``."""
    path = canonical_output(path)
    fmt = output_format(path, output_format_override)
    check_text_columns(frame.schema, fmt)
    compress = path != STDIO and path.lower().endswith(".gz") and fmt in ("csv", "tsv", "ndjson")
    write_bytes(path, serialise(frame, fmt, gzip_text=compress))


def write_bytes(path: str, data: bytes) -> None:
    """Write bytes atomically to ``path`` (temporary file + rename), or to stdout for ``-``."""
    path = canonical_output(path)
    if path == STDIO:
        try:
            with committing():
                sys.stdout.flush()
                write_all(sys.stdout.buffer, data)
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
    if path.endswith(("/", os.sep)):
        raise OutputError(f"{path}: cannot write (is a directory)")
    directory = target.parent
    if not directory.is_dir():
        raise OutputError(f"{path}: cannot write (no directory {str(Path(path).parent)!r})")
    try:
        temporary = new_temporary_file(directory, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as error:
        raise OutputError(f"{path}: cannot write ({error.strerror})") from None
    try:
        yield temporary
        _fsync(temporary)
        if target.is_dir():
            raise OutputError(f"{path}: cannot write (is a directory)")
        os.chmod(temporary, _file_mode(target))
        with committing():
            os.replace(temporary, target)
            unregister_temporary(temporary)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        unregister_temporary(temporary)
        if isinstance(error, OutputError):
            raise
        raise OutputError(f"{path}: cannot write ({error.strerror or error})") from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        unregister_temporary(temporary)
        raise


def _file_mode(target: Path) -> int:
    """The mode of the file being replaced, else 0o666 less the process umask."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _write_stream(path: str, data: bytes) -> None:
    try:
        with committing(), open(path, "wb") as handle:
            write_all(handle, data)
    except OSError as error:
        raise OutputError(f"{path}: cannot write ({error.strerror or error})") from None


def check_destination(
    path: str | None, *, data_format: InputFormat | None = None, table: bool = False
) -> None:
    """Refuse an output before any work is done: an unknown extension (for tables), a missing
    directory, a directory in place of a file (``-o out/``, exit 73), or a binary table
    (Parquet, Arrow) for standard output on a terminal (exit 2)."""
    if path is None:
        return
    if canonical_output(path) == STDIO:
        if table and output_format(path, data_format) in BINARY_FORMATS and _stdout_is_terminal():
            raise UsageError(
                f"refusing to write {output_format(path, data_format).capitalize()} to a "
                "terminal; redirect standard output or give -o FILE"
            )
        return
    if is_stream(path):
        return
    target = Path(os.path.realpath(path))
    if target.is_dir() or path.endswith(("/", os.sep)):
        raise OutputError(f"{path}: cannot write (is a directory)")
    if table:
        output_format(path, data_format)
    if not target.parent.is_dir():
        raise OutputError(f"{path}: cannot write (no directory {str(Path(path).parent)!r})")
    _probe(path, target)


def _probe(path: str, target: Path) -> None:
    """What the final write needs, tried before any work, so that no output is left replaced
    beside one that fails at the end (``resample``'s new sample beside the old record): a file
    can be created in ``target``'s directory (the writer's temporary file; ``os.access`` said
    yes to root on a read-only mount's files or in ``/sys``), and an existing ``target`` is
    not immutable or append-only (``chattr +i``/``+a``: the final rename fails, for root
    too). A file without write permission is replaced by the rename, as ``mv`` replaces it."""
    try:
        probe = new_temporary_file(target.parent, prefix=f".{target.name}.", suffix=".probe")
    except OSError as error:
        raise OutputError(f"{path}: cannot write ({error.strerror or error})") from None
    remove_temporary(probe)
    if target.is_file() and _fixed(target):
        raise OutputError(
            f"{path}: cannot write (the file is immutable or append-only: see lsattr)"
        )


#: Linux's ioctl for a file's attributes, and the two that forbid replacing it.
_FS_IOC_GETFLAGS = 0x80086601
_IMMUTABLE_OR_APPEND_ONLY = 0x10 | 0x20


def _fixed(target: Path) -> bool:
    """Whether Linux marks ``target`` immutable or append-only. Read, never opened for
    writing (a watcher of close-after-write events would see a write); False where the file
    system or platform cannot say."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import fcntl

        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
        try:
            flags = bytearray(8)
            fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        finally:
            os.close(fd)
    except OSError:
        return False
    return bool(int.from_bytes(flags[:4], sys.byteorder) & _IMMUTABLE_OR_APPEND_ONLY)


#: Table formats that are not text (refused on a terminal).
BINARY_FORMATS: frozenset[str] = frozenset({"parquet", "arrow"})


def _stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _fsync(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def require_distinct_outputs(paths: Sequence[str | None], inputs: Sequence[str | None]) -> None:
    """Refuse an output that would overwrite one of the inputs before it was read in full,
    and two outputs on standard output (rows and a report, say), which no reader can split."""
    given = [p for p in inputs if p is not None]
    if sum(p == STDIO for p in given) > 1:
        raise UsageError("standard input ('-') can be read only once; give files for the others")
    if sum(p is not None and canonical_output(p) == STDIO for p in paths) > 1:
        raise UsageError(
            "two outputs would be written to standard output ('-'): give a file for one of them"
        )
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
