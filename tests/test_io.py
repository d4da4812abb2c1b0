"""The shared I/O contract (DESIGN.md, "Inputs" and "Outputs"), in process."""

from __future__ import annotations

import gzip
import io
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_cli import io as calib_io
from calib_cli.core.sampling import (
    ClassRates,
    hash_keys,
    hash_row_numbers,
    hash_uint64_keys,
    integer_of_text,
    keep_mask,
    rate_threshold,
    row_thresholds,
)
from calib_cli.errors import InputError, MissingInputError, OutputError, UsageError
from calib_cli.io.identity import integer_text_bits
from calib_cli.types import CsvDialect
from tests.conftest import RunCalib

FRAME = pl.DataFrame(
    {
        "id": [1, 2, 3, 4],
        "score": [0.1, 0.9, 0.4, 0.7],
        "label": [0, 1, 0, 1],
        "w": [1.0, 2.0, 1, 1],
    }
)


def _write_all_formats(directory: Path) -> dict[str, Path]:
    paths = {
        "csv": directory / "t.csv",
        "tsv": directory / "t.tsv",
        "csv.gz": directory / "t.csv.gz",
        "parquet": directory / "t.parquet",
        "arrow": directory / "t.arrow",
        "ndjson": directory / "t.ndjson",
    }
    FRAME.write_csv(paths["csv"])
    FRAME.write_csv(paths["tsv"], separator="\t")
    paths["csv.gz"].write_bytes(gzip.compress(paths["csv"].read_bytes()))
    FRAME.write_parquet(paths["parquet"])
    FRAME.write_ipc(paths["arrow"])
    FRAME.write_ndjson(paths["ndjson"])
    return paths


@pytest.mark.parametrize("kind", ["csv", "tsv", "csv.gz", "parquet", "arrow", "ndjson"])
def test_every_format_reads_the_same_numbers(tmp_path: Path, kind: str) -> None:
    table = calib_io.read_table(str(_write_all_formats(tmp_path)[kind]))
    np.testing.assert_array_equal(table.scores("score"), FRAME["score"].to_numpy())
    np.testing.assert_array_equal(table.labels("label"), [0.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(table.weights("w"), [1.0, 2.0, 1.0, 1.0])


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("csv", "csv"),
        ("tsv", "tsv"),
        ("csv.gz", "csv"),
        ("parquet", "parquet"),
        ("arrow", "arrow"),
        ("ndjson", "ndjson"),
    ],
)
def test_stdin_is_sniffed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, expected: str
) -> None:
    data = _write_all_formats(tmp_path)[kind].read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    table = calib_io.read_table("-")
    assert table.format == expected
    assert table.name == "stdin"
    np.testing.assert_array_equal(table.scores("score"), FRAME["score"].to_numpy())


def test_arrow_stream_on_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.BytesIO()
    FRAME.write_ipc_stream(buffer)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(buffer.getvalue())))
    assert calib_io.read_table("-").frame.equals(FRAME)


def test_csv_pass_through_columns_are_untouched(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text("id,score,label,note\n007,0.50,1,a b\n010,1.0,0,\n")
    table = calib_io.read_table(str(source))
    out = tmp_path / "out.csv"
    calib_io.write_table(table.with_columns({"calibrated": np.array([0.25, 0.5])}), str(out))
    assert (
        out.read_text() == "id,score,label,note,calibrated\n007,0.50,1,a b,0.25\n010,1.0,0,,0.5\n"
    )


def test_score_error_line_names_file_column_count_and_first_row(tmp_path: Path) -> None:
    source = tmp_path / "scores.csv"
    rows = ["0.5"] * 16 + ["1.2", "0.3", "-0.1", "7"]
    source.write_text("score,label\n" + "".join(f"{s},0\n" for s in rows))
    with pytest.raises(InputError) as caught:
        calib_io.read_table(str(source)).scores("score")
    assert str(caught.value) == (
        f"{source}: column 'score' has 3 values outside [0, 1] (first at row 17: 1.2)"
    )


def test_text_that_is_not_a_number(tmp_path: Path) -> None:
    source = tmp_path / "s.csv"
    source.write_text("score,label\n0.1,0\nabc,1\n")
    with pytest.raises(
        InputError,
        match=r"s.csv: column 'score' has 1 value that is not "
        r"a number \(first at row 2: 'abc'\)",
    ):
        calib_io.read_table(str(source)).scores("score")


def test_missing_column_lists_the_columns(tmp_path: Path) -> None:
    source = tmp_path / "s.csv"
    source.write_text("p,y\n0.1,0\n")
    with pytest.raises(
        InputError,
        match=r"s.csv: no column 'score' \(set --score-col\); "
        r"columns are: p, y",
    ):
        calib_io.read_table(str(source)).scores("score")


def test_labels_accept_booleans_words_and_a_named_positive_value(tmp_path: Path) -> None:
    source = tmp_path / "l.csv"
    source.write_text("a,b,c\ntrue,fraud,1.0\nFalse,ok,0\n")
    table = calib_io.read_table(str(source))
    assert table.labels("a").tolist() == [1.0, 0.0]
    assert table.labels("b", positive_label="fraud").tolist() == [1.0, 0.0]
    assert table.labels("c").tolist() == [1.0, 0.0]
    with pytest.raises(InputError, match="--positive-label"):
        table.labels("b")
    with pytest.raises(InputError, match="never equals --positive-label 'yes'"):
        table.labels("b", positive_label="yes")


def test_labels_with_three_values_or_missing_are_refused(tmp_path: Path) -> None:
    source = tmp_path / "l.csv"
    source.write_text("y,z\na,1\nb,\nc,0\n")
    table = calib_io.read_table(str(source))
    with pytest.raises(InputError, match="3 distinct values"):
        table.labels("y", positive_label="a")
    with pytest.raises(InputError, match=r"column 'z' has 1 value missing \(first at row 2"):
        table.labels("z")


def test_negative_weight_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "w.csv"
    source.write_text("score,label,w\n0.1,0,1\n0.2,1,-2\n")
    with pytest.raises(InputError, match=r"w.csv: column 'w' has 1 value that is negative"):
        calib_io.read_table(str(source)).weights("w")


def test_missing_file_empty_file_and_garbage(tmp_path: Path) -> None:
    with pytest.raises(MissingInputError, match=r"nope\.csv: no such file"):
        calib_io.read_table(str(tmp_path / "nope.csv"))
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(InputError, match="empty"):
        calib_io.read_table(str(tmp_path / "empty.csv"))
    (tmp_path / "header.csv").write_text("score,label\n")
    with pytest.raises(InputError, match="no data rows"):
        calib_io.read_table(str(tmp_path / "header.csv"))
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="cannot read as PARQUET"):
        calib_io.read_table(str(tmp_path / "bad.parquet"))


@pytest.mark.parametrize("suffix", ["csv", "tsv", "parquet", "arrow", "ndjson", "csv.gz"])
def test_write_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"out.{suffix}"
    calib_io.write_table(FRAME, str(path))
    assert calib_io.read_table(str(path)).scores("score").tolist() == FRAME["score"].to_list()


def test_same_frame_same_bytes() -> None:
    for fmt in ("csv", "parquet", "arrow", "ndjson"):
        assert calib_io.serialise(FRAME, fmt) == calib_io.serialise(FRAME.clone(), fmt)


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "keep.csv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), calib_io.atomic_destination(str(target)) as temporary:
        temporary.write_text("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.csv"]


def test_unwritable_destination(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="cannot write"):
        calib_io.write_text(str(tmp_path / "no" / "dir" / "x.json"), "{}")
    with pytest.raises(UsageError, match="unknown output extension"):
        calib_io.write_table(FRAME, str(tmp_path / "x.xlsx"))


def test_added_column_may_not_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    FRAME.write_csv(path)
    with pytest.raises(UsageError, match="already has a column 'score'"):
        calib_io.read_table(str(path)).with_columns({"score": np.zeros(4)})


def test_drop_invalid_rows_counts_each_row_once_by_its_first_reason(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    # row 7 has two problems (score not a number, label 2): it counts under the score only
    path.write_text("score,label,w\n0.1,0,1\n1.5,1,1\n0.3,x,1\n0.4,1,-1\n,0,1\n0.9,1,2\nn/a,2,1\n")
    table = calib_io.read_table(str(path))
    options: dict[str, Any] = {
        "score_cols": ["score"],
        "score_kind": "probability",
        "label_col": "label",
        "positive_label": None,
        "weight_col": "w",
    }
    kept, invalid = calib_io.drop_invalid_rows(table, max_invalid=5, **options)
    assert (invalid.rows, invalid.dropped, invalid.kept) == (7, 5, 2)
    assert dict(invalid.by_reason) == {
        "score not a number": 1,
        "score missing": 1,
        "score outside [0, 1]": 1,
        "label not 0/1": 1,
        "w negative": 1,
    }
    assert kept.scores("score").tolist() == [0.1, 0.9]
    # 5 of 7 rows: above a count of 4, a fraction of 0.7 (4.9 rows) and the default 1%
    for limit in (4, 0.7, None):
        with pytest.raises(
            InputError, match=r"t.csv: 5 of 7 rows invalid \(score not a number: 1, "
        ):
            calib_io.drop_invalid_rows(table, max_invalid=limit, **options)
    assert calib_io.drop_invalid_rows(table, max_invalid=0.72, **options)[1].dropped == 5


def test_categories_are_sorted_codes(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("g\nb\na\nb\n")
    names, codes = calib_io.read_table(str(path)).categories("g")
    assert names == ["a", "b"]
    assert codes.tolist() == [1, 0, 1]


# ---------------------------------------------- identity columns (io/identity.py) ----------


def test_csv_groups_keep_each_text_and_show_integers_as_numbers(tmp_path: Path) -> None:
    """Two texts are two groups ("1" and "1.0", "007" and "7", "02134" kept with its zero);
    an integer's text is the number; numbers (and text that reads as one) order by value."""
    path = tmp_path / "t.csv"
    cells = ["10", "1.0", "007", "x", "02134", "1", "", "7", "9", "1.0"]
    # a second column: in a file of one column an empty cell is a blank line, not a row
    path.write_text("g,n\n" + "\n".join(f"{c},{i}" for i, c in enumerate(cells)) + "\n")
    values, codes = calib_io.read_table(str(path)).groups("g")
    assert values == [1, "1.0", "007", 7, 9, 10, "02134", "x", None]
    assert [values[c] for c in codes] == [
        10, "1.0", "007", "x", "02134", 1, None, 7, 9, "1.0",
    ]  # fmt: skip


def test_a_chunk_names_its_groups_as_the_whole_file_does(tmp_path: Path) -> None:
    """Each value on its own: a chunk of integers' texts and a chunk with "007" in it name
    "7" alike (streaming estimate-shift reads a file in chunks)."""
    path = tmp_path / "t.csv"
    path.write_text("g\n7\n8\n007\n7\n")
    table = calib_io.read_table(str(path))
    first = calib_io.Table(table.frame.slice(0, 2), table.name, table.format)
    second = calib_io.Table(table.frame.slice(2), table.name, table.format)
    assert first.groups("g")[0] == [7, 8]
    assert second.groups("g")[0] == ["007", 7]
    assert table.groups("g")[0] == ["007", 7, 8]


def test_typed_groups_keep_their_type_and_booleans_are_text(tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {"i": [10, 9, None], "f": [1.5, float("nan"), 0.5], "b": [True, False, True],
         "s": ["7", "007", "b"]}
    )  # fmt: skip
    path = tmp_path / "t.parquet"
    frame.write_parquet(path)
    table = calib_io.read_table(str(path))
    assert table.groups("i")[0] == [9, 10, None]
    assert table.groups("f")[0] == [0.5, 1.5, None]
    assert table.groups("b")[0] == ["false", "true"]
    assert table.groups("s")[0] == ["007", 7, "b"]  # text: the rule of CSV text


def test_identity_columns_never_become_floats_in_a_typed_read(tmp_path: Path) -> None:
    """A CSV read for a Parquet output: an identity column of "1", "1.0" and "2" stays text
    (as floats "1" and "1.0" were one value and "2" was "2.0"); all integers' texts: Int64."""
    path = tmp_path / "t.csv"
    path.write_text("g,n,x\n1,1,0.5\n1.0,2,1\n2,3,2\n")
    with calib_io.reading_identities(["g", "n", None]):
        typed = calib_io.read_table(str(path), typed=True).frame
    assert typed.schema == {"g": pl.String, "n": pl.Int64, "x": pl.Float64}
    assert typed["g"].to_list() == ["1", "1.0", "2"]
    plain = calib_io.read_table(str(path), typed=True).frame  # outside: a float column
    assert plain["g"].dtype == pl.Float64


def test_integers_a_double_cannot_hold_keep_their_column_as_text(tmp_path: Path) -> None:
    """2**53 + 1 beside a 0.5 made the column Float64 and the id 9007199254740992.0 in a
    typed output: the column stays text; up to 2**53 the integers are exact as doubles."""
    path = tmp_path / "t.csv"
    path.write_text("big,small\n9007199254740993,9007199254740992\n0.5,0.5\n")
    typed = calib_io.read_table(str(path), typed=True).frame
    assert typed["big"].to_list() == ["9007199254740993", "0.5"]
    assert typed["small"].to_list() == [9007199254740992.0, 0.5]


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(
        st.one_of(
            st.integers(-(2**65), 2**65).map(str),
            st.from_regex(r"[-+ 0]{0,2}[0-9]{1,20}[ .]?", fullmatch=True),
            st.text(max_size=5),
        ),
        max_size=20,
    )
)
def test_integer_text_bits_is_integer_of_text_in_polars(texts: list[str]) -> None:
    frame = pl.DataFrame({"k": texts}, schema={"k": pl.String})
    bits = frame.select(integer_text_bits(pl.col("k")))["k"].to_list()
    expected = [None if (v := integer_of_text(t)) is None else v % 2**64 for t in texts]
    assert bits == expected


# ------------------------------------------------- the streaming rule is the core's rule


def _core_kept(
    keys: list[int] | list[str] | None,
    labels: np.ndarray,
    strata: np.ndarray,
    rates: dict[str, tuple[float, float]],
    seed: int,
) -> np.ndarray:
    """The rows :mod:`calib_cli.core.sampling` keeps (its specification, row by row)."""
    if keys is None:
        hashes = hash_row_numbers(labels.size, seed=seed)
    elif isinstance(keys[0], str):
        hashes = hash_keys(keys, seed=seed)  # each key by the rule: integers' texts as integers
    else:
        bits = np.array([k % 2**64 for k in keys], dtype=np.uint64)  # two's complement
        hashes = hash_uint64_keys(bits, seed=seed)
    names = sorted(rates)
    table = [ClassRates(negative_rate=rates[s][0], positive_rate=rates[s][1]) for s in names]
    codes = np.searchsorted(np.array(names), strata)
    return keep_mask(hashes, row_thresholds(labels, table, stratum_index=codes))


@pytest.mark.parametrize("key_kind", ["row", "integer", "integer-text", "string"])
def test_the_streaming_sampling_rule_keeps_the_rows_of_the_core_rule(key_kind: str) -> None:
    """io.sample_rows (a Polars rewrite run batch by batch) against core.sampling, on random
    keys, labels, strata, rates and seeds."""
    rng = np.random.default_rng(len(key_kind))
    for _ in range(12):
        n = int(rng.integers(1, 400))
        seed = int(rng.integers(0, 2**63)) * 2 + int(rng.integers(0, 2))
        labels = (rng.random(n) < 0.3).astype(np.int64)
        strata = rng.choice(["a", "b", "c"], n)
        rates = {
            s: (float(rng.choice([rng.random(), 1.0, 0.5])), float(rng.choice([1.0, rng.random()])))
            for s in ("a", "b", "c")
        }
        rates = {s: (max(neg, 1e-3), max(pos, 1e-3)) for s, (neg, pos) in rates.items()}
        raw = rng.integers(-(2**63), 2**63, n, dtype=np.int64).tolist()
        keys: list[int] | list[str] | None
        columns: dict[str, object] = {"label": labels, "stratum": strata}
        if key_kind == "row":
            keys, key_col, hash_kind = None, None, "row"
        elif key_kind == "integer":
            keys, key_col, hash_kind = raw, "key", "integer"
            columns["key"] = pl.Series(raw, dtype=pl.Int64)
        elif key_kind == "integer-text":  # ids read from CSV as text, some above 2**63
            big = [k % 2**64 for k in raw]
            # " 5", "05" and "+5" are not integers' texts: hashed as text, each on its own
            texts = [
                (f" {k:d}", f"0{k:d}", f"+{k:d}")[i % 3] if i % 4 == 0 else f"{k:d}"
                for i, k in enumerate(big)
            ]
            keys, key_col, hash_kind = texts, "key", "string"
            columns["key"] = texts
        else:
            keys = [f"user-{k}-é" if k % 2 else str(k) for k in raw]
            key_col, hash_kind = "key", "string"
            columns["key"] = keys
        lazy = pl.DataFrame(columns).with_row_index("rid").lazy()
        kept = calib_io.sample_rows(
            lazy,
            label_col="label",
            label_dtype=pl.Int64(),
            positive_label=None,
            strata_col="stratum",
            key_col=key_col,
            key_hash_kind=hash_kind,
            seed=seed,
            thresholds={
                s: (rate_threshold(neg), rate_threshold(pos)) for s, (neg, pos) in rates.items()
            },
            weights=None,
            weight_col_out=None,
        ).collect()
        expected = _core_kept(keys, labels, strata, rates, seed)
        assert kept["rid"].to_list() == np.flatnonzero(expected).tolist()


# ------------------------------------------------------------------ CSV dialects (#11)

EURO = "id;score;label;amount\n007;0,25;0;1,50\n008;0,5;1;2\n009;1;1; 3,5\n"


@pytest.mark.parametrize("compressed", [False, True])
def test_a_semicolon_decimal_comma_file_reads_as_its_numbers_in_both_readers(
    tmp_path: Path, compressed: bool
) -> None:
    path = tmp_path / ("e.csv.gz" if compressed else "e.csv")
    path.write_bytes(gzip.compress(EURO.encode()) if compressed else EURO.encode())
    with calib_io.using_dialect(CsvDialect(";", decimal_comma=True)):
        table = calib_io.read_table(str(path))
        assert table.columns == ["id", "score", "label", "amount"]
        assert table.scores("score").tolist() == [0.25, 0.5, 1.0]
        assert table.numbers("amount").tolist() == [1.5, 2.0, 3.5]
        assert table.frame["id"].to_list() == ["007", "008", "009"]  # text kept as it was
        scan = calib_io.scored_scan(
            calib_io.scan_table(str(path))[0],
            name="e.csv",
            score_cols=["score"],
            label_col="label",
            weight_col=None,
            positive_label=None,
            by=None,
            on_invalid="error",
        )
        assert scan.lazy.collect()["score"].to_list() == [0.25, 0.5, 1.0]
        # a typed output keeps exact text: '1,50' would come back '1,5', ' 3,5' has a space
        typed = calib_io.read_table(str(path), typed=True).frame
        assert typed.schema["score"] == pl.Float64 and typed["score"].to_list() == [0.25, 0.5, 1.0]
        assert typed.schema["amount"] == pl.String and typed.schema["id"] == pl.String
    # without --decimal-comma the same text is not a number
    with calib_io.using_dialect(CsvDialect(";")), pytest.raises(InputError, match="not numbers"):
        calib_io.read_table(str(path)).scores("score")


def test_csv_outputs_are_written_in_the_input_dialect(tmp_path: Path) -> None:
    frame = pl.DataFrame({"id": ["007"], "calibrated": [0.25]})
    with calib_io.using_dialect(CsvDialect(";", decimal_comma=True)):
        calib_io.write_table(frame, str(tmp_path / "o.csv"))
        calib_io.write_table(frame, str(tmp_path / "o.tsv"))
        calib_io.sink_table(frame.lazy(), str(tmp_path / "s.csv"), output_format_override=None)
    with calib_io.using_dialect(CsvDialect("|")):
        calib_io.write_table(frame, str(tmp_path / "p.csv"))
    assert (tmp_path / "o.csv").read_text() == "id;calibrated\n007;0,25\n"
    assert (tmp_path / "s.csv").read_text() == "id;calibrated\n007;0,25\n"
    assert (tmp_path / "o.tsv").read_text() == "id\tcalibrated\n007\t0,25\n"  # TSV: a tab
    assert (tmp_path / "p.csv").read_text() == "id|calibrated\n007|0.25\n"
    calib_io.write_table(frame, str(tmp_path / "d.csv"))  # outside a dialect: plain CSV
    assert (tmp_path / "d.csv").read_text() == "id,calibrated\n007,0.25\n"


@pytest.mark.parametrize(("text", "shown"), [("a;b", "';'"), ("a|b", "'|'"), ("a\tb", "tab")])
def test_a_csv_read_as_one_column_suggests_the_separator(
    tmp_path: Path, text: str, shown: str
) -> None:
    path = tmp_path / "one.csv"
    path.write_text(f"{text}\n0,5{text[1]}1\n")
    message = f"the file looks separated by {shown}: add --separator {shown}"
    with pytest.raises(InputError, match=re.escape(message)):
        calib_io.read_table(str(path))
    with pytest.raises(InputError, match=re.escape(message)):
        calib_io.scan_table(str(path))
    with calib_io.using_dialect(CsvDialect(text[1])):
        assert calib_io.read_table(str(path)).columns == ["a", "b"]
    # a missing column of a one-column table (read with another separator) names the likely one
    table = calib_io.Table(pl.DataFrame({text: ["1"]}), "one.csv", "csv")
    with pytest.raises(InputError, match=re.escape(f"columns are: {text}; {message}")):
        table.scores("score")


def test_a_row_with_more_fields_than_the_header_names_the_separator(tmp_path: Path) -> None:
    path = tmp_path / "dc.csv"
    path.write_text("score,label\n0,5,1\n0,25,0\n")  # a decimal comma in a comma CSV
    hint = "with --decimal-comma, separate fields with another character: add --separator ';'"
    with calib_io.using_dialect(CsvDialect(decimal_comma=True)):
        with pytest.raises(
            InputError, match=re.escape("dc.csv: cannot read as CSV: ") + ".*" + re.escape(hint)
        ):
            calib_io.read_table(str(path))
        lazy, _ = calib_io.scan_table(str(path))
        with pytest.raises(InputError, match=re.escape(hint)):
            calib_io.scan.collect(lambda: lazy.collect(), "dc.csv")
    with pytest.raises(InputError, match=r"more fields than the header: check --separator$"):
        calib_io.read_table(str(path))


@pytest.mark.parametrize("engine", ["memory", "streaming"])
@pytest.mark.parametrize("column", ["score", "w"])
def test_one_value_that_is_not_a_number_reads_well_in_every_engine(
    tmp_path: Path, invoke_calib: RunCalib, engine: str, column: str
) -> None:
    """One message for bad values in every reader (core.checks.values_message): "1 value
    that is not a number", where some said "1 value that is not numbers"."""
    rows = [f"{(i % 9 + 1) / 10},{i % 2},1" for i in range(30)]
    rows[3] = "abc,1,1" if column == "score" else "0.5,1,abc"
    (tmp_path / "s.csv").write_text("score,label,w\n" + "\n".join(rows) + "\n")
    done = invoke_calib(
        ["reliability", "s.csv", "--weight-col", "w", "--engine", engine], cwd=tmp_path
    )
    assert done.returncode == 65
    assert done.stderr.decode() == (
        f"error: s.csv: column '{column}' has 1 value that is not a number "
        "(first at row 4: 'abc')\n"
    )


def test_both_engines_name_the_same_first_problem(tmp_path: Path, invoke_calib: RunCalib) -> None:
    """A NaN score at row 4 and a label 2 at row 20: the scores are checked first in every
    engine (the in-memory engine named the label)."""
    rows = [f"{(i % 9 + 1) / 10},{i % 2}" for i in range(30)]
    rows[3], rows[19] = "NaN,1", "0.5,2"
    (tmp_path / "s.csv").write_text("score,label\n" + "\n".join(rows) + "\n")
    lines = {
        engine: invoke_calib(["reliability", "s.csv", "--engine", engine], cwd=tmp_path).stderr
        for engine in ("memory", "streaming")
    }
    assert lines["memory"] == lines["streaming"]
    assert lines["memory"].decode().startswith("error: s.csv: column 'score' has 1 value ")


@pytest.mark.parametrize(
    "args",
    [
        ["reliability", "m.csv", "--engine", "streaming"],
        ["summarize", "m.csv", "-o", "s.parquet"],
        ["resample", "m.csv", "--negative-rate", "0.5", "-o", "o.csv"],
    ],
    ids=["reliability-streaming", "summarize", "resample"],
)
def test_a_ragged_row_streamed_is_bad_input_with_the_hint(
    tmp_path: Path, invoke_calib: RunCalib, args: list[str]
) -> None:
    """A row with more fields than the header: the summary's pass crashed (exit 70), and
    resample's sink named no file and gave no hint."""
    rows = [f"{(i % 9 + 1) / 10},{i % 2}" for i in range(40)]
    rows[1] += ",5"
    (tmp_path / "m.csv").write_text("score,label\n" + "\n".join(rows) + "\n")
    done = invoke_calib(args, cwd=tmp_path)
    assert done.returncode == 65, done.stderr
    line = done.stderr.decode().strip().splitlines()[-1]
    assert line.startswith("error: m.csv: cannot ")
    assert line.endswith("; a row has more fields than the header: check --separator")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv"]
