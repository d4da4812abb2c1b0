"""A CSV header naming a column twice is bad input (exit 65, one line) in every reader: the
parser renamed the second ``x`` to ``x_duplicated_0``, the first ``score`` was read as the
scores without a word, and the output's header was not the input's."""

from __future__ import annotations

from pathlib import Path

import pytest

from calib_cli.errors import ExitCode
from tests.conftest import RunCalib

HEADER = "score,label,x,x\n"
ROWS = "".join(f"{(i % 9 + 1) / 10},{i % 2},a,b\n" for i in range(40))


@pytest.mark.parametrize(
    "args",
    [
        ["reliability", "{f}"],
        ["reliability", "{f}", "--engine", "streaming"],
        ["resample", "{f}", "-o", "o.csv", "--negative-rate", "0.5"],
        ["recalibrate", "{f}", "--cross-fit", "2", "-o", "o.csv"],
        ["recalibrate", "{f}", "--negative-rate", "0.5", "-o", "o.csv", "--engine", "streaming"],
        ["summarize", "{f}", "-o", "s.parquet"],
    ],
    ids=["reliability", "reliability-streaming", "resample", "recalibrate",
         "recalibrate-streaming", "summarize"],
)  # fmt: skip
@pytest.mark.parametrize("stdin", [False, True])
def test_a_column_named_twice_is_refused(
    tmp_path: Path, invoke_calib: RunCalib, args: list[str], stdin: bool
) -> None:
    (tmp_path / "d.csv").write_text(HEADER + ROWS)
    name = "-" if stdin else "d.csv"
    done = invoke_calib(
        [a.format(f=name) for a in args],
        cwd=tmp_path,
        stdin=(HEADER + ROWS).encode() if stdin else None,
    )
    assert done.returncode == ExitCode.DATA_ERROR, done.stderr
    shown = "stdin" if stdin else "d.csv"
    assert done.stderr.decode().splitlines()[-1] == (  # after the stdin warning, if any
        f"error: {shown}: the header names column 'x' 2 times; give each column its own name"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv"]


def test_a_column_whose_name_only_looks_renamed_is_read(
    tmp_path: Path, invoke_calib: RunCalib
) -> None:
    (tmp_path / "d.csv").write_text("score,label,x_duplicated_0\n" + ROWS.replace(",a,b", ",a"))
    done = invoke_calib(["reliability", "d.csv", "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_count_is_of_the_one_name_repeated() -> None:
    """'a' and 'a_b' both repeated: 'a' is named twice, not three times."""
    from calib_cli.errors import InputError
    from calib_cli.io.dialect import refuse_duplicated_columns

    with pytest.raises(InputError, match="names column 'a' 2 times"):
        refuse_duplicated_columns(["a", "a_duplicated_0", "a_b", "a_b_duplicated_0"], "t.csv")


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_a_quoted_header_with_doubled_quotes_reads_and_writes_back_the_same(
    tmp_path: Path, invoke_calib: RunCalib, engine: str
) -> None:
    """A quoted header cell with its quotes doubled is the name s "x": the parser kept the
    doubled quotes, so the column was reachable only so, and each CSV written doubled them
    again."""
    header = '"s ""x""",label\n'
    (tmp_path / "q.csv").write_text(header + ROWS.replace(",a,b", ""))
    done = invoke_calib(
        ["recalibrate", "q.csv", "--negative-rate", "0.5", "--score-col", 's "x"', "--engine",
         engine, "-o", "o.csv", "-q"],
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "o.csv").read_text().splitlines()[0] == '"s ""x""",label,calibrated'


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_names_equal_once_the_quotes_are_undone_are_refused(
    tmp_path: Path, invoke_calib: RunCalib, engine: str
) -> None:
    """A column a"b and a quoted cell that undoes to a"b would be one name: refused in both
    readers (the scan's rename failed inside Polars)."""
    header = 'score,label,a"b,"a""b"\n'
    (tmp_path / "q.csv").write_text(header + ROWS)
    done = invoke_calib(["reliability", "q.csv", "--engine", engine], cwd=tmp_path)
    assert done.returncode == ExitCode.DATA_ERROR, done.stderr
    assert done.stderr.decode().strip().splitlines()[-1] == (
        "error: q.csv: the header names column 'a\"b' 2 times; give each column its own name"
    )
