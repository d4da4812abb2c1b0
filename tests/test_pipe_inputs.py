"""Inputs that can be read only once (process substitution, named pipes): every command reads
them as it reads the same file, through a temporary copy that is removed when it ends. They
used to fail ("No such device", or a CSV read from the middle after the columns were read)."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import CALIB


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rng = np.random.default_rng(8)
    n = 3000
    score = rng.beta(2, 6, n)
    frame = pl.DataFrame(
        {
            "id": np.arange(n),
            "score": score,
            "label": (rng.random(n) < score).astype(np.int64),
            "stratum": rng.choice(["a", "b"], n),
        }
    )
    frame.write_csv(tmp_path / "ref.csv")
    frame.write_parquet(tmp_path / "ref.parquet")
    frame.drop("label").write_csv(tmp_path / "batch.csv")
    (tmp_path / "tmp").mkdir()
    return tmp_path


def _bash(command: str, folder: Path) -> subprocess.CompletedProcess[bytes]:
    """Run ``command`` in bash (for ``<(...)``) in ``folder``, with TMPDIR in ``folder/tmp``."""
    env = {**os.environ, "NO_COLOR": "1", "TMPDIR": str(folder / "tmp")}
    return subprocess.run(
        ["bash", "-c", command.replace("calib ", f"{CALIB} ")],
        cwd=folder,
        capture_output=True,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    ("piped", "plain"),
    [
        (
            "calib recalibrate <(cat ref.parquet) --fit <(cat ref.csv) --method platt -o out.csv",
            "calib recalibrate ref.parquet --fit ref.csv --method platt -o out.csv",
        ),
        (
            "calib estimate-shift --reference <(cat ref.csv) --target <(gzip -c batch.csv) "
            "--bootstrap 20 -o out.csv",
            "calib estimate-shift --reference ref.csv --target batch.csv --bootstrap 20 -o out.csv",
        ),
        (
            "calib rerank-strata --reference <(cat ref.csv) --target <(cat ref.parquet) "
            "--strata-col stratum -o out.csv",
            "calib rerank-strata --reference ref.csv --target ref.parquet --strata-col stratum "
            "-o out.csv",
        ),
        (
            "calib resample <(cat ref.csv) --negative-rate 0.3 --key-col id -o out.csv",
            "calib resample ref.csv --negative-rate 0.3 --key-col id -o out.csv",
        ),
        (
            "calib recalibrate <(cat ref.csv) --negative-rate 0.5 --engine streaming -o out.csv",
            "calib recalibrate ref.csv --negative-rate 0.5 --engine streaming -o out.csv",
        ),
    ],
)
def test_a_process_substitution_gives_the_rows_the_file_gives(
    data: Path, piped: str, plain: str
) -> None:
    done = _bash(piped + " -q", data)
    assert done.returncode == 0, done.stderr.decode()
    from_pipe = (data / "out.csv").read_bytes()
    again = _bash(plain + " -q", data)
    assert again.returncode == 0, again.stderr.decode()
    assert from_pipe == (data / "out.csv").read_bytes()
    assert list((data / "tmp").iterdir()) == []  # the copies are gone


def test_reliability_reads_a_named_pipe_of_parquet_once_and_names_it(data: Path) -> None:
    """A FIFO without an extension holding Parquet: sniffed, read through its copy (the
    engine choice, the columns and the rows each read it), and named as given."""
    fifo = data / "scores"
    os.mkfifo(fifo)
    payload = (data / "ref.parquet").read_bytes()

    def feed() -> None:
        with open(fifo, "wb") as handle:
            handle.write(payload)

    writer = threading.Thread(target=feed)
    writer.start()
    done = _bash("calib reliability scores --json --bootstrap 0", data)
    writer.join(timeout=10)
    assert done.returncode == 0, done.stderr.decode()
    plain = _bash("calib reliability ref.parquet --json --bootstrap 0", data)
    piped_report = done.stdout.decode().replace('"scores"', '"ref.parquet"')
    assert piped_report == plain.stdout.decode()
    assert list((data / "tmp").iterdir()) == []


def test_a_pipe_that_cannot_be_copied_says_where_and_why(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from calib_cli.errors import ExitCode, MissingInputError
    from calib_cli.io import spool

    fifo = data / "pipe"
    os.mkfifo(fifo)
    not_a_directory = data / "ref.csv"  # a file where the temporary directory should be
    monkeypatch.setattr(spool.tempfile, "gettempdir", lambda: str(not_a_directory))

    def feed() -> None:
        with open(fifo, "wb") as handle:
            handle.write(b"score,label\n0.2,0\n")

    writer = threading.Thread(target=feed)
    writer.start()
    with pytest.raises(MissingInputError) as caught:
        spool.readable(str(fifo))
    writer.join(timeout=10)
    assert caught.value.exit_code == ExitCode.NO_INPUT
    assert str(caught.value) == (
        f"{fifo}: cannot copy the pipe to {not_a_directory} to read it more than once "
        "(Not a directory; set TMPDIR to a directory with room)"
    )
    assert spool.readable(str(data / "ref.csv")) == str(data / "ref.csv")  # files: as they are


def test_a_slow_writer_s_first_bytes_are_waited_for_before_sniffing(data: Path) -> None:
    """Parquet written a byte, then the rest after a pause: the format is sniffed from the
    first 4 KiB, not from the first read (which held only "P"; the streaming engine reads
    the copy by its name)."""
    import time

    fifo = data / "slow"
    os.mkfifo(fifo)
    payload = (data / "ref.parquet").read_bytes()

    def feed() -> None:
        with open(fifo, "wb") as handle:
            handle.write(payload[:1])
            handle.flush()
            time.sleep(0.3)
            handle.write(payload[1:])

    writer = threading.Thread(target=feed)
    writer.start()
    done = _bash("calib reliability slow --json --bootstrap 0 --engine streaming", data)
    writer.join(timeout=10)
    assert done.returncode == 0, done.stderr.decode()
    assert '"n": 3000' in done.stdout.decode()
