"""``--seed`` is a 64-bit unsigned integer in every command, refused otherwise (exit 2, one
line) before any work: a negative seed crashed rerank-strata's bootstrap (exit 70) and gave
resample a multi-line message with a Polars expression in it, after reading had begun."""

from __future__ import annotations

from pathlib import Path

import pytest

from calib_cli.errors import ExitCode
from tests.conftest import RunCalib

COMMANDS = {
    "resample": ["resample", "a.csv", "-o", "o.csv", "--negative-rate", "0.5"],
    "rerank-strata": ["rerank-strata", "--reference", "a.csv", "--target", "a.csv",
                      "--strata-col", "stratum", "--estimate-target-prevalence", "-o", "o.csv"],
    "reliability": ["reliability", "a.csv", "--bootstrap", "20"],
    "estimate-shift": ["estimate-shift", "--reference", "a.csv", "--target", "a.csv"],
    "recalibrate": ["recalibrate", "a.csv", "--cross-fit", "3", "-o", "o.csv"],
}  # fmt: skip


@pytest.fixture
def data(scored_dir: Path) -> Path:
    return scored_dir


@pytest.mark.parametrize("seed", [-5, 2**64, 10**23])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_seed_outside_64_bits_is_refused_before_any_work(
    data: Path, invoke_calib: RunCalib, command: str, seed: int
) -> None:
    done = invoke_calib([*COMMANDS[command], "--seed", str(seed)], cwd=data)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert done.stderr.decode() == (
        f"error: calib {command}: invalid value for '--seed': a seed is a whole number from 0 "
        f"to 2**64 - 1, got {seed}\n"
    )
    assert sorted(p.name for p in data.iterdir()) == ["a.csv"]


@pytest.mark.parametrize("command", ["resample", "rerank-strata"])
def test_the_largest_seed_is_accepted(data: Path, invoke_calib: RunCalib, command: str) -> None:
    done = invoke_calib([*COMMANDS[command], "--seed", str(2**64 - 1), "-q"], cwd=data)
    assert done.returncode == 0, done.stderr
    assert (data / "o.csv").exists()
