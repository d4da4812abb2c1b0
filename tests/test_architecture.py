"""The layering of STYLE.md: the numeric core never imports Polars, Rich or Typer."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

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


def _imported_modules(path: Path) -> set[str]:
    """Top-level names of every module a file imports (import x, from x import y)."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module.split(".")[0])
    return modules


def test_only_io_imports_polars_and_the_core_imports_no_ui() -> None:
    package = Path(calib_cli.core.__file__).resolve().parent.parent
    files = sorted(package.rglob("*.py"))
    polars_users = [str(f.relative_to(package)) for f in files if "polars" in _imported_modules(f)]
    assert polars_users == ["io.py"]
    for path in (package / "core").glob("*.py"):
        assert not _imported_modules(path) & {"polars", "rich", "typer"}, path.name
