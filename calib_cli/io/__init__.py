"""Reading and writing tables: the Polars edge (the only package that imports Polars).

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

One module per concern:

* :mod:`~calib_cli.io.formats`: extensions, sniffing, ``-`` for standard input and output;
* :mod:`~calib_cli.io.dialect`: ``--separator`` and ``--decimal-comma`` for readers and CSV writers;
* :mod:`~calib_cli.io.columns`: numbers and labels from columns, errors naming the file;
* :mod:`~calib_cli.io.identity`: groups, batches, strata and keys: one rule for every engine;
* :mod:`~calib_cli.io.table`: :class:`Table` (a table read in full) and ``--on-invalid drop``;
* :mod:`~calib_cli.io.invalid`: rows dropped by reason, and ``--max-invalid``;
* :mod:`~calib_cli.io.read`: reading a whole table;
* :mod:`~calib_cli.io.scan`: lazy scans and streaming queries (streaming commands start here);
* :mod:`~calib_cli.io.counts`: streaming group-bys (rows and positives per stratum);
* :mod:`~calib_cli.io.sampling`: the hash sampling rule as a streaming Polars query;
* :mod:`~calib_cli.io.write`: atomic writes, output checks;
* :mod:`~calib_cli.io.sink`: streaming a lazy query to a file or standard output;
* :mod:`~calib_cli.io.scored_scan`: a lazy scan of scored rows, checked in one streaming pass;
* :mod:`~calib_cli.io.summary_file`: summary files (Parquet or JSON).
"""

from __future__ import annotations

from typing import TypeAlias

import polars as pl

from calib_cli.io.columns import naming, positive_label_expr, unlabelled_target_message
from calib_cli.io.counts import ClassCounts, class_counts, counts_by_stratum
from calib_cli.io.dialect import current_dialect, require_column, using_dialect
from calib_cli.io.formats import (
    STDIO,
    TEXT_FORMATS,
    canonical_output,
    display_name,
    format_from_extension,
    is_stream,
    output_format,
    resolve_format,
    sniff_format,
    typed_output,
)
from calib_cli.io.identity import (
    order_key,
    reads_as_number,
    refuse_missing_name,
    reported_value,
    typed_value,
)
from calib_cli.io.invalid import InvalidRows
from calib_cli.io.read import read_table, reading_identities, reading_numbers
from calib_cli.io.sampling import key_kind, sample_rows
from calib_cli.io.scan import (
    ROW_INDEX,
    check_passthrough_columns,
    collect,
    column_names,
    column_schema,
    row_count_hint,
    scan_table,
)
from calib_cli.io.scored_scan import FLAG_COLUMN, ScoredScan, scored_scan
from calib_cli.io.sink import sink_table
from calib_cli.io.summary_file import read_summary, summary_format, write_summary
from calib_cli.io.table import Table, drop_invalid_rows
from calib_cli.io.write import (
    atomic_destination,
    check_destination,
    require_distinct_outputs,
    serialise,
    write_bytes,
    write_table,
    write_text,
)

#: A column's type, as a reader knows it (workflows hold it without importing Polars).
ColumnType: TypeAlias = pl.DataType

__all__ = [
    "FLAG_COLUMN",
    "ROW_INDEX",
    "STDIO",
    "TEXT_FORMATS",
    "ClassCounts",
    "ColumnType",
    "InvalidRows",
    "ScoredScan",
    "Table",
    "atomic_destination",
    "canonical_output",
    "check_destination",
    "check_passthrough_columns",
    "class_counts",
    "collect",
    "column_names",
    "column_schema",
    "counts_by_stratum",
    "current_dialect",
    "display_name",
    "drop_invalid_rows",
    "format_from_extension",
    "is_stream",
    "key_kind",
    "naming",
    "order_key",
    "output_format",
    "positive_label_expr",
    "read_summary",
    "read_table",
    "reading_identities",
    "reading_numbers",
    "reads_as_number",
    "refuse_missing_name",
    "reported_value",
    "require_column",
    "require_distinct_outputs",
    "resolve_format",
    "row_count_hint",
    "sample_rows",
    "scan_table",
    "scored_scan",
    "serialise",
    "sink_table",
    "sniff_format",
    "summary_format",
    "typed_output",
    "typed_value",
    "unlabelled_target_message",
    "using_dialect",
    "write_bytes",
    "write_summary",
    "write_table",
    "write_text",
]
