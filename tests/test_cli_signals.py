"""Interrupts end calib at once in every phase, with exit 130 (SIGINT) or 143 (SIGTERM), the
line ``error: interrupted``, and no output: no partial file, no temporary file left behind,
an existing output untouched (DESIGN.md, "Signals").

Each test waits for a readiness sign before it sends the signal (the pipe drained by calib,
the whole input read, the temporary output created), never for a fixed time, and bounds the
exit generously (:data:`EXIT_WITHIN`, for a loaded machine) while the design aims at well
under a second; the measured latencies are printed (``pytest -s``).
"""

from __future__ import annotations

import array
import fcntl
import os
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import CALIB, _environment

#: The test's bound on the time from the signal to the exit (the target is one second).
EXIT_WITHIN = 5.0
#: The bound on waiting for a readiness sign.
READY_WITHIN = 120.0

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc and FIONREAD")


def _csv_rows(n: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    score = rng.beta(1, 12, n)
    label = (rng.random(n) < score).astype(np.int64)
    frame = pl.DataFrame({"id": [f"{i:07d}" for i in range(n)], "score": score, "label": label})
    return frame.write_csv().encode()


def _big_file(path: Path, n: int = 1_500_000) -> Path:
    rng = np.random.default_rng(5)
    score = rng.beta(1, 12, n)
    label = (rng.random(n) < score).astype(np.int8)
    frame = pl.DataFrame({"score": score, "label": label, "other": rng.random(n)})
    if path.suffix == ".csv":
        frame.write_csv(path)
    else:
        frame.write_parquet(path)
    return path


def _wait_for(condition: Callable[[], bool], process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + READY_WITHIN
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"calib ended (exit {process.returncode}) before {what}")
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            pytest.fail(f"calib never reached: {what}")
        time.sleep(0.02)


def _bytes_in_pipe(fd: int) -> int:
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return int(count[0])


def _bytes_read(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def _stop(
    process: subprocess.Popen[bytes], signum: int, *, group: int | None = None
) -> tuple[int, float, bytes]:
    """Send the signal (to the process, or to a process group); return the exit code, the
    seconds to exit, and standard error."""
    started = time.monotonic()
    if group is not None:
        os.killpg(group, signum)
    else:
        process.send_signal(signum)
    try:
        process.wait(timeout=EXIT_WITHIN)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"calib did not end within {EXIT_WITHIN} s of signal {signum}")
    latency = time.monotonic() - started
    stderr = b""
    if process.stderr is not None:
        stderr = process.stderr.read()
        process.stderr.close()
    print(f"signal {signum}: exit {process.returncode} after {latency * 1000:.0f} ms")
    return process.returncode, latency, stderr


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def _calib(args: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [CALIB, *args], stderr=subprocess.PIPE, env=_environment(), **kwargs
    )


# -------------------------------------------------------------------------- reading stdin


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_while_reading_an_open_stdin_pipe(tmp_path: Path, signum: int, code: int) -> None:
    """Like ``sleep 30 | calib ...`` then ``kill -INT``: the pipe stays open, calib waits on
    it, and the signal ends calib at once with nothing written."""
    out = tmp_path / "out.csv"
    process = _calib(
        ["recalibrate", "-", "--negative-rate", "0.5", "-o", str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    process.stdin.write(_csv_rows(2000))
    process.stdin.flush()
    _wait_for(lambda: _bytes_in_pipe(process.stdin.fileno()) == 0, process, "stdin drained")
    returncode, _, stderr = _stop(process, signum)
    process.stdin.close()
    assert returncode == code
    assert stderr.decode().strip().splitlines()[-1] == "error: interrupted"
    assert list(tmp_path.iterdir()) == []


PRODUCER = (
    "import sys, time\n"
    "sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())\n"
    "sys.stdout.buffer.flush()\n"
    "open(sys.argv[2], 'w').close()\n"
    "time.sleep(120)\n"
)


def test_ctrl_c_on_a_pipeline_wins_over_the_truncated_input(tmp_path: Path) -> None:
    """``producer | calib ... -o out.csv`` and Ctrl-C (SIGINT to the process group): the
    producer dies, so calib sees the end of a valid but truncated input at the same time as
    its own SIGINT. The signal wins: exit 130, no output."""
    rows = tmp_path / "rows.csv"
    rows.write_bytes(_csv_rows(2000))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "calibrated.csv"
    written = tmp_path / "written"
    producer = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, str(rows), str(written)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        process_group=0,
    )
    assert producer.stdout is not None
    process = _calib(
        ["recalibrate", "-", "--negative-rate", "0.5", "-o", str(out)],
        stdin=producer.stdout,
        stdout=subprocess.DEVNULL,
        process_group=producer.pid,
    )
    pipe = producer.stdout.fileno()
    _wait_for(written.exists, process, "the producer wrote its rows")
    # calib drains the pipe only once it reads its input (its handlers are installed by
    # then); it then waits on the pipe that the producer holds open
    _wait_for(lambda: _bytes_in_pipe(pipe) == 0, process, "calib read the rows")
    returncode, _, stderr = _stop(process, signal.SIGINT, group=producer.pid)
    producer.wait(timeout=EXIT_WITHIN)
    producer.stdout.close()
    assert returncode == 130, stderr
    assert list(out_dir.iterdir()) == []


# ----------------------------------------------------------------------------- computing


@pytest.mark.parametrize(
    ("signum", "code"),
    # SIGTERM in `make test-slow` (3 s a run; both signals while reading stdin run in both)
    [(signal.SIGINT, 130), pytest.param(signal.SIGTERM, 143, marks=pytest.mark.slow)],
)
def test_signal_while_computing_leaves_an_existing_output_untouched(
    tmp_path: Path, signum: int, code: int
) -> None:
    big = _big_file(tmp_path / "big.parquet")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "calibrated.parquet"
    out.write_bytes(b"the previous run's output")
    process = _calib(
        ["recalibrate", str(big), "--fit", str(big), "--method", "isotonic", "-o", str(out)],
        stdout=subprocess.DEVNULL,
    )
    size = big.stat().st_size
    _wait_for(lambda: _bytes_read(process.pid) >= 2 * size, process, "both inputs read")
    returncode, _, stderr = _stop(process, signum)
    assert returncode == code, stderr
    assert stderr.decode().strip().splitlines()[-1] == "error: interrupted"
    assert out.read_bytes() == b"the previous run's output"
    assert _leftovers(out_dir) == []


# ------------------------------------------------------------------------------- writing


def test_sigint_while_writing_a_file_removes_the_temporary(tmp_path: Path) -> None:
    big = _big_file(tmp_path / "big.csv")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "sample.parquet"
    out.write_bytes(b"old")
    process = _calib(
        ["resample", str(big), "--negative-rate", "0.9", "-o", str(out)],
        stdout=subprocess.DEVNULL,
    )
    _wait_for(lambda: bool(_leftovers(out_dir)), process, "the temporary output created")
    returncode, _, stderr = _stop(process, signal.SIGINT)
    assert returncode == 130, stderr
    assert _leftovers(out_dir) == []
    assert out.read_bytes() == b"old"


def test_sigint_while_writing_to_a_stalled_stdout_pipe(tmp_path: Path) -> None:
    """Standard output is a pipe nobody reads: calib blocks writing, and still ends at once."""
    rows = tmp_path / "rows.csv"
    rows.write_bytes(_csv_rows(100_000))
    reader, writer = os.pipe()
    try:
        process = _calib(
            ["recalibrate", str(rows), "--negative-rate", "0.5", "-o", "-"], stdout=writer
        )
        os.close(writer)
        writer = -1
        _wait_for(lambda: _bytes_in_pipe(reader) >= 4096, process, "the pipe filled")
        returncode, _, stderr = _stop(process, signal.SIGINT)
    finally:
        os.close(reader)
        if writer >= 0:
            os.close(writer)
    assert returncode == 130, stderr
    assert _leftovers(tmp_path) == []
