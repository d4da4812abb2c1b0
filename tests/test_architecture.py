"""The layering of STYLE.md: the numeric core never imports Polars, Rich or Typer."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import calib_cli.core


def test_importing_every_core_module_loads_no_io_or_ui_library() -> None:
    modules = [f"calib_cli.core.{m.name}" for m in pkgutil.iter_modules(calib_cli.core.__path__)]
    assert "calib_cli.core.metrics" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in ('polars', 'rich', 'typer') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_only_io_imports_polars() -> None:
    from pathlib import Path

    package = Path(calib_cli.core.__file__).resolve().parent.parent
    users = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "import polars" in path.read_text()
    )
    assert users == ["io.py"]
