"""A file whose bytes are another format than its name (or ``--input-format``) says.

Read as the format the name says, such a file failed with messages about bytes the user never
sees: a Parquet file named ``.csv`` with "cannot read as CSV: invalid utf-8 sequence", an
NDJSON one with "could not parse ``"score":0.0184477`` as dtype str", a JSON array (pandas'
``orient="records"``) with "the header names column 'label":1' 2 times". Its first bytes
now refuse it, in both engines, with exit 65 and a line that says what the file looks like
and what to do; following that advice reads it as the rightly named file is read. Gzip is
no other format (a gzip CSV named ``.csv`` is read as before), and formats sniffed from the
bytes (standard input, pipes, unknown extensions such as ``.txt``) are what the bytes say.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli import io as calib_io
from calib_cli.errors import InputError
from tests.conftest import RunCalib

N = 300
ENGINES = ["memory", "streaming"]


def _frame() -> pl.DataFrame:
    rng = np.random.default_rng(11)
    score = rng.beta(2, 5, N)
    return pl.DataFrame(
        {
            "id": [f"r{i:04d}" for i in range(N)],
            "score": score,
            "label": (rng.random(N) < score).astype(np.int64),
        }
    )


def _written(write: Callable[[io.BytesIO], object]) -> bytes:
    buffer = io.BytesIO()
    write(buffer)
    return buffer.getvalue()


def _contents() -> dict[str, bytes]:
    """The same rows in every format calib reads, and in two it does not."""
    frame = _frame()
    records = frame.to_dicts()
    book = io.BytesIO()
    with zipfile.ZipFile(book, "w") as archive:  # what an .xlsx workbook is
        archive.writestr("xl/workbook.xml", "<workbook/>")
    return {
        "csv": _written(frame.write_csv),
        "tsv": _written(lambda b: frame.write_csv(b, separator="\t")),
        "parquet": _written(frame.write_parquet),
        "arrow": _written(frame.write_ipc),
        "arrow-stream": _written(frame.write_ipc_stream),
        "ndjson": "".join(json.dumps(row) + "\n" for row in records).encode(),
        "json-array": json.dumps(records).encode(),
        "json-array-pretty": json.dumps(records, indent=2).encode(),
        "zip": book.getvalue(),
    }


CONTENTS = _contents()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """``ok.csv``, ``ok.parquet``, ``ok.arrow`` and ``ok.ndjson``: the references."""
    for fmt in ("csv", "parquet", "arrow", "ndjson"):
        (tmp_path / f"ok.{fmt}").write_bytes(CONTENTS[fmt])
    return tmp_path


def _reliability(
    invoke_calib: RunCalib, folder: Path, path: str, engine: str, *extra: str
) -> tuple[int, str, str]:
    done = invoke_calib(["reliability", path, "--engine", engine, "--json", *extra], cwd=folder)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


# (file name, its bytes, extra options, the one line the command ends with)
MISMATCHES = [
    (
        "s.csv",
        CONTENTS["parquet"],
        (),
        "s.csv: the file looks like Parquet (it starts with PAR1), not CSV: "
        "name it .parquet or give --input-format parquet",
    ),
    (
        "s.csv",
        CONTENTS["ndjson"],
        (),
        "s.csv: the file looks like NDJSON (it starts with {), not CSV: "
        "name it .ndjson or give --input-format ndjson",
    ),
    (
        "s.tsv",
        CONTENTS["arrow"],
        (),
        "s.tsv: the file looks like Arrow IPC (it starts with ARROW1), not TSV: "
        "name it .arrow or give --input-format arrow",
    ),
    (
        "s.parquet",
        CONTENTS["arrow-stream"],
        (),
        "s.parquet: the file looks like Arrow IPC (it starts with an IPC stream's ffffffff), "
        "not Parquet: name it .arrow or give --input-format arrow",
    ),
    (
        "s.parquet",
        CONTENTS["csv"],
        (),
        "s.parquet: the file looks like CSV (it starts with text 'id,score,label'), not "
        "Parquet: name it .csv or give --input-format csv",
    ),
    (
        "s.jsonl",
        CONTENTS["tsv"],
        (),
        "s.jsonl: the file looks like TSV (it starts with text 'id\\tscore\\tlabel'), not "
        "NDJSON: name it .tsv or give --input-format tsv",
    ),
    (
        "s.csv.gz",
        gzip.compress(CONTENTS["ndjson"]),
        (),
        "s.csv.gz: the file looks like gzip-compressed NDJSON (decompressed, it starts with {), "
        "not CSV: name it .ndjson.gz or give --input-format ndjson",
    ),
    (
        "s.csv",
        gzip.compress(CONTENTS["parquet"]),
        (),
        "s.csv: the file looks like gzip-compressed Parquet (decompressed, it starts with "
        "PAR1), not CSV: name it .parquet.gz or give --input-format parquet",
    ),
    (
        "ok.parquet",
        CONTENTS["parquet"],
        ("--input-format", "csv"),
        "ok.parquet: the file looks like Parquet (it starts with PAR1), not CSV "
        "(--input-format csv): leave out --input-format csv",
    ),
    (
        "s.csv",
        CONTENTS["parquet"],
        ("--input-format", "ndjson"),
        "s.csv: the file looks like Parquet (it starts with PAR1), not NDJSON "
        "(--input-format ndjson): give --input-format parquet",
    ),
]
UNREADABLE = [
    (
        "s_arr.json",
        CONTENTS["json-array"],
        "s_arr.json: the file looks like a JSON array (it starts with [), which calib does not "
        "read: calib reads NDJSON, one JSON object per line (.ndjson, .jsonl); convert it with "
        "jq -c '.[]' s_arr.json > s_arr.ndjson, or in pandas with "
        "to_json(..., orient='records', lines=True)",
    ),
    (
        "s.ndjson",
        CONTENTS["json-array-pretty"],
        "s.ndjson: the file looks like a JSON array (it starts with [), which calib does not "
        "read: calib reads NDJSON, one JSON object per line (.ndjson, .jsonl); convert it with "
        "jq -c '.[]' s.ndjson > s-lines.ndjson, or in pandas with "
        "to_json(..., orient='records', lines=True)",
    ),
    (
        "s.json.gz",
        gzip.compress(CONTENTS["json-array"]),
        "s.json.gz: the file looks like a JSON array (it starts with [), which calib does not "
        "read: calib reads NDJSON, one JSON object per line (.ndjson, .jsonl); convert it with "
        "zcat s.json.gz | jq -c '.[]' > s.ndjson, or in pandas with "
        "to_json(..., orient='records', lines=True)",
    ),
    (
        "book.csv",
        CONTENTS["zip"],
        "book.csv: the file looks like a zip archive (it starts with PK), such as an Excel "
        "workbook, which calib does not read: save it as CSV or Parquet",
    ),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("name", "content", "extra", "message"), MISMATCHES)
def test_another_format_is_refused_saying_what_it_looks_like(
    invoke_calib: RunCalib,
    folder: Path,
    engine: str,
    name: str,
    content: bytes,
    extra: tuple[str, ...],
    message: str,
) -> None:
    (folder / name).write_bytes(content)
    code, out, err = _reliability(invoke_calib, folder, name, engine, *extra)
    assert (code, out, err) == (65, "", f"error: {message}\n")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("name", "content", "message"), UNREADABLE)
def test_tables_calib_does_not_read_are_refused_saying_how_to_convert(
    invoke_calib: RunCalib, folder: Path, engine: str, name: str, content: bytes, message: str
) -> None:
    (folder / name).write_bytes(content)
    code, out, err = _reliability(invoke_calib, folder, name, engine)
    assert (code, out, err) == (65, "", f"error: {message}\n")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("name", "content", "renamed", "fmt"),
    [
        ("s.csv", CONTENTS["parquet"], "s.parquet", "parquet"),
        ("s.csv", CONTENTS["ndjson"], "s.ndjson", "ndjson"),
        ("s.tsv", CONTENTS["arrow"], "s.arrow", "arrow"),
        ("s.parquet", CONTENTS["csv"], "s.csv", "csv"),
        ("s.csv.gz", gzip.compress(CONTENTS["ndjson"]), "s.ndjson.gz", "ndjson"),
        ("s.csv", gzip.compress(CONTENTS["parquet"]), "s.parquet.gz", "parquet"),
    ],
)
def test_following_the_advice_reads_the_rows(
    invoke_calib: RunCalib,
    folder: Path,
    engine: str,
    name: str,
    content: bytes,
    renamed: str,
    fmt: str,
) -> None:
    """Renamed as the message says, or read with the ``--input-format`` it names, the file
    gives what the same rows give from the rightly named file of that format."""
    reference = _reliability(invoke_calib, folder, f"ok.{fmt}", engine)
    assert reference[0] == 0, reference[2]
    (folder / name).write_bytes(content)
    assert _reliability(invoke_calib, folder, name, engine, "--input-format", fmt) == reference
    (folder / name).rename(folder / renamed)
    assert _reliability(invoke_calib, folder, renamed, engine) == reference


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("name", "content", "fmt"),
    [
        ("gz.csv", gzip.compress(CONTENTS["csv"]), "csv"),  # gzip is no other format
        ("gz.ndjson", gzip.compress(CONTENTS["ndjson"]), "ndjson"),
        ("gz.parquet", gzip.compress(CONTENTS["parquet"]), "parquet"),  # streaming failed
        ("p.txt", CONTENTS["parquet"], "parquet"),  # unknown extensions are sniffed
        ("n.dat", CONTENTS["ndjson"], "ndjson"),
        ("a.json", CONTENTS["ndjson"], "ndjson"),
        ("t.txt", CONTENTS["csv"], "csv"),
    ],
)
def test_what_was_read_is_still_read(
    invoke_calib: RunCalib, folder: Path, engine: str, name: str, content: bytes, fmt: str
) -> None:
    reference = _reliability(invoke_calib, folder, f"ok.{fmt}", engine)
    assert reference[0] == 0, reference[2]
    (folder / name).write_bytes(content)
    assert _reliability(invoke_calib, folder, name, engine) == reference


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        (
            CONTENTS["parquet"],
            ("--input-format", "csv"),
            "stdin: the input looks like Parquet (it starts with PAR1), not CSV "
            "(--input-format csv): leave out --input-format csv",
        ),
        (
            CONTENTS["json-array"],
            (),
            "stdin: the input looks like a JSON array (it starts with [), which calib does not "
            "read: calib reads NDJSON, one JSON object per line (.ndjson, .jsonl); convert it "
            "with jq -c '.[]', or in pandas with to_json(..., orient='records', lines=True)",
        ),
    ],
)
@pytest.mark.parametrize("engine", ENGINES)
def test_standard_input_is_checked_too(
    invoke_calib: RunCalib, engine: str, content: bytes, extra: tuple[str, ...], message: str
) -> None:
    """Its format is sniffed (a JSON array is still refused), unless ``--input-format`` says
    one. (The streaming engine warns first that standard input is read into memory.)"""
    done = invoke_calib(["reliability", "-", "--engine", engine, *extra], stdin=content)
    last_line = done.stderr.decode().splitlines()[-1]
    assert (done.returncode, done.stdout, last_line) == (65, b"", f"error: {message}")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_named_pipe_is_read_as_its_bytes_say_whatever_its_name(
    invoke_calib: RunCalib, folder: Path, engine: str
) -> None:
    """A pipe's name says little (``mkfifo scores.csv``): its copy is named by its sniffed
    format, as standard input is sniffed, in both engines (the in-memory one read a FIFO
    named ``.csv`` holding Parquet as CSV and failed); a JSON array is refused as from a file.
    (Each pipe has its own name: this process keeps a pipe's copy, by name, to its end.)"""
    reference = _reliability(invoke_calib, folder, "ok.parquet", engine)
    outcomes = []
    for kind in ("parquet", "json-array"):
        payload = CONTENTS[kind]
        fifo = folder / f"{kind}-{engine}.csv"
        os.mkfifo(fifo)

        def feed(target: Path = fifo, data: bytes = payload) -> None:
            with open(target, "wb") as handle:
                handle.write(data)

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        outcomes.append(_reliability(invoke_calib, folder, fifo.name, engine))
        writer.join(timeout=10)
    assert outcomes[0] == reference
    code, out, err = outcomes[1]
    assert (code, out, err.splitlines()[-1]) == (
        65,
        "",
        f"error: json-array-{engine}.csv: the file looks like a JSON array (it starts with [), "
        "which calib does not read: calib reads NDJSON, one JSON object per line (.ndjson, "
        ".jsonl); convert it with jq -c '.[]', or in pandas with "
        "to_json(..., orient='records', lines=True)",
    )


@pytest.mark.parametrize("name", ["s.csv", "s_arr.json"])
def test_both_readers_refuse_with_the_same_message(tmp_path: Path, name: str) -> None:
    """The in-memory reader and the streaming scan, and the columns checked before any work
    (:func:`~calib_cli.io.column_names`), refuse before parsing a byte of the rows."""
    path = tmp_path / name
    path.write_bytes(CONTENTS["parquet"] if name == "s.csv" else CONTENTS["json-array"])
    messages = set()
    for read in (calib_io.read_table, calib_io.scan_table, calib_io.column_names):
        with pytest.raises(InputError) as caught:
            read(str(path))
        messages.add(str(caught.value))
    assert len(messages) == 1
    assert messages.pop().startswith(f"{path}: the file looks like ")


@pytest.mark.parametrize(
    ("command", "role"),
    [
        (["recalibrate", "ok.csv", "--method", "platt", "-o", "out.csv", "--fit"], "fit"),
        (["estimate-shift", "--target", "ok.csv", "--reference"], "reference"),
        (["resample", "--negative-rate", "0.5", "-o", "out.csv"], "input"),
    ],
)
def test_every_command_checks_every_input(
    invoke_calib: RunCalib, folder: Path, command: list[str], role: str
) -> None:
    (folder / "s.csv").write_bytes(CONTENTS["parquet"])
    done = invoke_calib([*command, "s.csv"], cwd=folder)
    assert (done.returncode, done.stderr.decode()) == (
        65,
        "error: s.csv: the file looks like Parquet (it starts with PAR1), not CSV: "
        "name it .parquet or give --input-format parquet\n",
    ), role
    assert not (folder / "out.csv").exists()


def test_the_installed_command_refuses_a_parquet_file_named_csv(
    run_calib: RunCalib, folder: Path
) -> None:
    (folder / "s.csv").write_bytes(CONTENTS["parquet"])
    done = run_calib(["reliability", "s.csv"], cwd=folder)
    assert (done.returncode, done.stdout, done.stderr.decode()) == (
        65,
        b"",
        "error: s.csv: the file looks like Parquet (it starts with PAR1), not CSV: "
        "name it .parquet or give --input-format parquet\n",
    )
