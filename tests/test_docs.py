"""The README documents every command, every option and every JSON report key."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.core
import typer.main

from calib_cli.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
COMMAND = typer.main.get_command(app)
assert isinstance(COMMAND, typer.core.TyperGroup)
COMMANDS = sorted(COMMAND.commands)


def test_every_command_has_a_section() -> None:
    assert COMMANDS, "no commands registered"
    for name in COMMANDS:
        assert f"## `calib {name}`" in README, f"README has no section for calib {name}"


def _section(title: str) -> str:
    """The README text from a '## ' heading to the next one."""
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 3)
    return README[start : end if end != -1 else len(README)]


CONTRACT = _section("The contract every command follows")


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_is_documented_in_its_section(name: str) -> None:
    """An option is documented where a reader looks: in the command's own section, or (for
    the options every command shares) in the contract."""
    section = _section(f"`calib {name}`")
    command = COMMAND.commands[name]
    for parameter in command.params:
        if isinstance(parameter, typer.core.TyperOption):
            longest = max(parameter.opts, key=len)
            assert any(
                f"`{longest}" in text or f"{longest} " in text for text in (section, CONTRACT)
            ), f"README does not mention {longest} in the section of calib {name}"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_help_has_an_example(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "calib_cli", name, "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "NO_COLOR": "1"},
        check=True,
    )
    assert "Example" in done.stdout


def _keys(value: object, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            keys.add(key)
            keys |= _keys(inner)
    elif isinstance(value, list):
        for inner in value:
            keys |= _keys(inner)
    return keys


def test_every_reliability_key_is_documented(tmp_path: Path) -> None:
    sample = ROOT / "sample_data" / "transactions.csv"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "calib_cli",
            "reliability",
            str(sample),
            "--by",
            "segment",
            "--json",
            "--bootstrap",
            "5",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    documented = set(re.findall(r"`([a-z_]+)`", README))
    missing = _keys(json.loads(done.stdout)) - documented
    assert not missing, f"README does not document reliability keys {sorted(missing)}"


SAMPLE = ROOT / "sample_data"
REPORTING_CALLS = {
    "estimate-shift": [
        "estimate-shift",
        "--reference",
        str(SAMPLE / "transactions.csv"),
        "--target",
        str(SAMPLE / "shifted_batch.csv"),
        "--batch-col",
        "day",
        "--costs",
        "1:20",
        "--bootstrap",
        "5",
        "--method",
        "map",
    ],
    "recalibrate": [
        "recalibrate",
        str(SAMPLE / "overconfident.csv"),
        "--cross-fit",
        "3",
        "--method",
        "auto",
        "--negative-rate",
        "0.5",
    ],
    "rerank-strata": [
        "rerank-strata",
        "--reference",
        str(SAMPLE / "strata_reference.csv"),
        "--target",
        str(SAMPLE / "strata_target.csv"),
        "--strata-col",
        "stratum",
    ],
    "resample": [
        "resample",
        str(SAMPLE / "train.csv"),
        "--negative-rate",
        "0.2",
        "--strata-col",
        "x1",
    ],
}


@pytest.mark.parametrize("name", sorted(REPORTING_CALLS))
def test_every_report_key_is_documented(name: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    args = [*REPORTING_CALLS[name], "--report", str(report), "-q"]
    if name == "resample":
        frame = tmp_path / "train.csv"
        frame.write_text(
            "id,x1,label\n" + "".join(f"{i},{i % 2},{int(i % 7 == 0)}\n" for i in range(60))
        )
        args[1] = str(frame)
    args += ["-o", str(tmp_path / "out.csv")]
    subprocess.run([sys.executable, "-m", "calib_cli", *args], check=True, capture_output=True)
    documented = set(re.findall(r"`([a-z_0-9]+)`", README))
    found = _keys(json.loads(report.read_text()))
    if name == "resample":
        found -= {"0", "1"}  # the strata of this test file are named 0 and 1
    missing = found - documented
    assert not missing, f"README does not document {name} report keys {sorted(missing)}"
