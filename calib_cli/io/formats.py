"""File formats and paths: extensions, sniffing, standard input and output."""

from __future__ import annotations

import re
import shlex
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import cast

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
_ZIP_MAGIC = b"PK\x03\x04"

TEXT_FORMATS: frozenset[str] = frozenset({"csv", "tsv"})

#: Each format's name in messages and the file name ending that says it.
LABELS: dict[InputFormat, str] = {
    "csv": "CSV",
    "tsv": "TSV",
    "parquet": "Parquet",
    "arrow": "Arrow IPC",
    "ndjson": "NDJSON",
}
SUFFIXES: dict[InputFormat, str] = {
    "csv": ".csv",
    "tsv": ".tsv",
    "parquet": ".parquet",
    "arrow": ".arrow",
    "ndjson": ".ndjson",
}


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
    >>> sniff_format(b"\\xef\\xbb\\xbf{}")  # as a file's name is checked: one reading
    'ndjson'
    """
    seen = _first_bytes_say(head)  # one reading of the first bytes (a BOM before a { too)
    return seen[0] if seen is not None and seen[0] in SUFFIXES else "csv"


def resolve_format(path: str, override: InputFormat | None, head: bytes = b"") -> InputFormat:
    """The format to read ``path`` with: the override, the extension, else sniffed bytes."""
    if override is not None:
        return override
    if path != STDIO:
        by_extension = format_from_extension(path)
        if by_extension is not None:
            return by_extension
    return sniff_format(head)


def checked_format(
    path: str, override: InputFormat | None, head: bytes, *, name: str
) -> InputFormat:
    """:func:`resolve_format` for the file at ``path`` (a pipe's copy, named by its sniffed
    format) whose first bytes are ``head`` (gzip or not), refusing (exit 65, naming ``name``)
    bytes that clearly are not what its name or ``--input-format`` says, or are a table calib
    does not read (:func:`_first_bytes_say`), before any parser sees them: read as the format
    the name says, a Parquet file named ``.csv`` failed with "invalid utf-8 sequence", an
    NDJSON one with "could not parse ``"score":0.0184477`` as dtype str", and a JSON array
    with "the header names column 'label":1' 2 times". A format sniffed from the bytes
    (standard input, pipes, unknown extensions) is what they say. Gzip is no other format:
    ``scores.csv`` holding gzip is read as CSV, as before, and the bytes checked are the
    first decompressed ones.

    >>> checked_format("s.csv", None, b"a,b\\n1,2\\n", name="s.csv")
    'csv'
    >>> try:
    ...     checked_format("s.csv", None, b"PAR1...", name="s.csv")
    ... except InputError as error:
    ...     print(*str(error).split(": "), sep="\\n")
    s.csv
    the file looks like Parquet (it starts with PAR1), not CSV
    name it .parquet or give --input-format parquet
    """
    compressed = head.startswith(GZIP_MAGIC)
    content = gunzipped_head(head) if compressed else head
    fmt = resolve_format(path, override, content)
    seen = _first_bytes_say(content)
    if seen is None:
        return fmt
    kind, evidence = seen
    subject = "the input" if path == STDIO else "the file"
    if kind == "json-array":
        raise InputError(
            f"{name}: {subject} looks like a JSON array (it starts with [), which calib does "
            "not read: calib reads NDJSON, one JSON object per line (.ndjson, .jsonl); convert "
            f"it with {_jq_command(path, name, compressed=compressed)}, or in pandas with "
            "to_json(..., orient='records', lines=True)"
        )
    if kind == "zip":
        raise InputError(
            f"{name}: {subject} looks like a zip archive (it starts with PK), such as an Excel "
            "workbook, which calib does not read: save it as CSV or Parquet"
        )
    given = override is not None or (path != STDIO and format_from_extension(path) is not None)
    if not given or kind == fmt or {kind, fmt} <= TEXT_FORMATS:
        return fmt
    seen_format = cast("InputFormat", kind)  # neither json-array nor zip
    label = LABELS[seen_format]
    if compressed:
        label, evidence = f"gzip-compressed {label}", f"decompressed, it starts with {evidence}"
    else:
        evidence = f"it starts with {evidence}"
    if override is None:
        suffix = SUFFIXES[seen_format] + (".gz" if compressed else "")
        fix, said = f"name it {suffix} or give --input-format {kind}", ""
    elif resolve_format(path, None, content) == kind:
        fix, said = f"leave out --input-format {override}", f" (--input-format {override})"
    else:
        fix, said = f"give --input-format {kind}", f" (--input-format {override})"
    raise InputError(
        f"{name}: {subject} looks like {label} ({evidence}), not {LABELS[fmt]}{said}: {fix}"
    )


def gunzipped_head(head: bytes) -> bytes:
    """The first bytes gzip data ``head`` decompresses to (at most 4 KiB: enough to say what
    the file holds); none when it does not decompress."""
    try:
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(head, 4096)
    except zlib.error:
        return b""


#: A JSON array of objects or of arrays (pandas' ``orient="records"`` or ``"values"``).
_JSON_ARRAY = re.compile(r"\[\s*[\[{\]]")


def _first_bytes_say(head: bytes) -> tuple[str, str] | None:
    """What the (decompressed) first bytes of a file clearly are, and what shows it: a format
    (Parquet's or Arrow's magic bytes; text: a ``{`` for NDJSON, as :func:`sniff_format` reads
    it, else CSV or TSV), ``json-array`` or ``zip`` (tables calib does not read); None when
    they do not say (no bytes, or binary of no known kind, such as text that is not UTF-8).

    >>> _first_bytes_say(b'[{"score":0.2}]'), _first_bytes_say(b"\\xef\\xbb\\xbf{}")
    (('json-array', '['), ('ndjson', '{'))
    >>> _first_bytes_say(b"id\\tscore\\n1\\t0.5"), _first_bytes_say(b"\\x00\\x01")
    (('tsv', "text 'id\\\\tscore'"), None)
    """
    for magic, kind, shown in (
        (_PARQUET_MAGIC, "parquet", "PAR1"),
        (ARROW_FILE_MAGIC, "arrow", "ARROW1"),
        (_ARROW_STREAM_MAGIC, "arrow", "an IPC stream's ffffffff"),
        (_ZIP_MAGIC, "zip", "PK"),
    ):
        if head.startswith(magic):
            return kind, shown
    text = _utf8_text(head)
    start = "" if text is None else text.lstrip("\ufeff \t\r\n")
    if not start:
        return None
    if _JSON_ARRAY.match(start):
        return "json-array", "["
    if start.startswith("{"):
        return "ndjson", "{"
    first = start.split("\n", 1)[0].rstrip("\r")
    shown = first if len(first) <= 40 else first[:37] + "..."
    return ("tsv" if "\t" in first and "," not in first else "csv"), f"text {shown!r}"


def _utf8_text(head: bytes) -> str | None:
    """``head`` as UTF-8 text (a character cut by the end of the bytes left out), or None
    when it is not text."""
    if b"\x00" in head:
        return None
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.end == len(head) and error.start >= len(head) - 3:
            return head[: error.start].decode("utf-8")
        return None


def _jq_command(path: str, name: str, *, compressed: bool) -> str:
    """The jq command that turns the JSON array in ``path`` into NDJSON beside it (for a
    pipe or standard input, the filter alone)."""
    if path == STDIO or path != name:
        return "jq -c '.[]'"
    stem = Path(_split_gz(path)[0])
    target = stem.with_suffix(".ndjson")
    if target == stem:
        target = stem.with_name(f"{stem.stem}-lines.ndjson")
    if compressed:
        return f"zcat {shlex.quote(path)} | jq -c '.[]' > {shlex.quote(str(target))}"
    return f"jq -c '.[]' {shlex.quote(path)} > {shlex.quote(str(target))}"


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
