"""The layering of STYLE.md, checked: one-way imports, one home per library.

cli (Typer wiring) -> workflows (typed results; no Typer, no Rich) -> io (the only Polars
user) / core (NumPy and SciPy only) -> artifacts / report. The CLI imports no SciPy, so that
``--help`` stays fast; core messages name parameters, not command-line options.
"""

from __future__ import annotations

import ast
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import calib_cli.core

PACKAGE = Path(calib_cli.core.__file__).resolve().parent.parent


def _imported_modules(path: Path) -> set[str]:
    """Top-level names of every module a file imports (import x, from x import y)."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module.split(".")[0])
    return modules


def _imported_calib_modules(path: Path) -> set[str]:
    """Every ``calib_cli.x.y`` module a file imports, at any depth of the file."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(a.name for a in node.names if a.name.startswith("calib_cli"))
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.startswith("calib_cli")
        ):
            modules.add(node.module)
    return modules


def _files(subpackage: str) -> list[Path]:
    return sorted((PACKAGE / subpackage).glob("*.py"))


def _loaded_after_importing(modules: list[str]) -> list[str]:
    """The libraries among Polars, Rich, Typer and SciPy that importing ``modules`` loads."""
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in ('polars', 'rich', 'typer', 'scipy') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded: list[str] = eval(done.stdout.strip())  # a printed list of names
    return loaded


def test_importing_every_core_module_loads_no_io_or_ui_library() -> None:
    modules = [f"calib_cli.core.{m.name}" for m in pkgutil.iter_modules(calib_cli.core.__path__)]
    assert "calib_cli.core.metrics" in modules
    assert set(_loaded_after_importing(modules)) <= {"scipy"}


#: Modules outside io/ that still import Polars, each to move its Polars code into io/ (the
#: summary layer's streaming group-by belongs beside io/scan.py). The set may only shrink.
POLARS_OUTSIDE_IO = frozenset({"summaries/scan.py"})


def test_only_io_imports_polars_and_the_core_imports_no_ui() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    users = {str(f.relative_to(PACKAGE)) for f in files if "polars" in _imported_modules(f)}
    assert any(user.startswith("io/") for user in users), "io/ no longer imports Polars?"
    outside = {user for user in users if not user.startswith("io/")}
    assert outside <= POLARS_OUTSIDE_IO, sorted(outside - POLARS_OUTSIDE_IO)
    for path in _files("core"):
        assert not _imported_modules(path) & {"polars", "rich", "typer"}, path.name


def test_the_core_imports_only_numpy_scipy_errors_types_and_itself() -> None:
    for path in _files("core"):
        for module in _imported_calib_modules(path):
            assert module.split(".")[1] in ("core", "errors", "types"), (path.name, module)


def test_the_cli_imports_no_scipy_and_no_polars() -> None:
    for path in _files("cli"):
        assert not _imported_modules(path) & {"scipy", "polars", "numpy"}, path.name


def test_workflows_import_no_typer_and_no_rich() -> None:
    for path in _files("workflows"):
        assert not _imported_modules(path) & {"typer", "rich", "click"}, path.name
        assert not any(m.startswith("calib_cli.cli") for m in _imported_calib_modules(path))
        assert not any(m.startswith("calib_cli.report") for m in _imported_calib_modules(path))
    modules = [f"calib_cli.workflows.{p.stem}" for p in _files("workflows")]
    assert "calib_cli.workflows.recalibrate" in modules
    assert not {"rich", "typer"} & set(_loaded_after_importing(modules))


def test_io_and_report_do_not_reach_up_into_workflows_or_the_cli() -> None:
    for sub in ("io", "report"):
        for path in _files(sub):
            above = {"calib_cli.cli", "calib_cli.workflows"} if sub == "io" else {"calib_cli.cli"}
            for module in _imported_calib_modules(path):
                # report may name the workflows' result types, for annotations only
                if sub == "report" and module.startswith("calib_cli.workflows"):
                    assert "TYPE_CHECKING" in path.read_text(), path.name
                    continue
                assert not any(module.startswith(a) for a in above), (path.name, module)


def test_starting_reliability_imports_no_scipy() -> None:
    """SciPy's special functions take about 0.2 s to import: the streaming reliability path
    imports them in the background while its pass reads (calib_cli.core.special)."""
    loaded = _loaded_after_importing(["calib_cli.cli.app", "calib_cli.workflows.reliability"])
    assert "scipy" not in loaded


def test_building_a_report_payload_does_not_import_rich() -> None:
    assert "rich" not in _loaded_after_importing(["calib_cli.report.payloads"])


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal but docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


#: Core modules whose messages still name command-line options (written before this rule);
#: their messages are to move to parameter names, with the CLI naming the options. The list
#: may only shrink.
FLAGS_IN_CORE_MESSAGES = frozenset({"chain.py", "checks.py", "prior.py", "sampling.py"})


def test_core_messages_name_parameters_not_command_line_options() -> None:
    flag = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
    offenders = {
        path.name
        for path in _files("core")
        if any(flag.search(text) for _, text in _string_constants(path))
    }
    assert offenders <= FLAGS_IN_CORE_MESSAGES, sorted(offenders - FLAGS_IN_CORE_MESSAGES)


def test_every_command_has_a_cli_module_and_a_workflow() -> None:
    from calib_cli.cli import app

    names = {command.callback.__module__ for command in app.registered_commands if command.callback}
    for module in names:
        stem = module.rsplit(".", 1)[1]
        assert module == f"calib_cli.cli.{stem}"
        assert (PACKAGE / "workflows" / f"{stem}.py").exists(), stem


def test_cli_command_modules_stay_thin() -> None:
    """A command body reads options -> workflow -> report: no loops over rows, no maths."""
    for path in _files("cli"):
        if path.stem in ("__init__", "app", "options", "session"):
            continue
        text = path.read_text()
        assert "import numpy" not in text and "np." not in text, path.name
        assert len(text.splitlines()) < 260, path.name


def test_only_report_plots_imports_matplotlib_and_only_when_drawing() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    users = {str(f.relative_to(PACKAGE)) for f in files if "matplotlib" in _imported_modules(f)}
    assert users <= {"report/plots.py"}, sorted(users)
    code = (
        "import sys, calib_cli.report.plots, calib_cli.cli.app\n"
        "print('matplotlib' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_commands_that_can_draw_import_matplotlib_only_with_plot(tmp_path: Path) -> None:
    """reliability, estimate-shift and rerank-strata without --plot: matplotlib stays unloaded
    (its import costs a second); with --plot it is loaded, in the same process."""
    rows = ["stratum,score,label"] + [
        f"{'AB'[i % 2]},{(i % 97 + 1) / 99:.4f},{int(i % 97 > 60 - 20 * (i % 2))}"
        for i in range(400)
    ]
    data = tmp_path / "rows.csv"
    data.write_text("\n".join(rows) + "\n")
    pair = ["--reference", str(data), "--target", str(data)]
    commands = [
        ["reliability", str(data), "--by", "stratum"],
        ["estimate-shift", *pair, "--bootstrap", "0"],
        ["rerank-strata", *pair, "--strata-col", "stratum", "-o", str(tmp_path / "out.csv")],
    ]
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from calib_cli.cli.app import app\n"
        "for args in " + repr(commands) + ":\n"
        "    done = CliRunner().invoke(app, [*args, '-q'])\n"
        "    assert done.exit_code == 0, (args, done.output)\n"
        "print('matplotlib' in sys.modules)\n"
        "done = CliRunner().invoke(app, [*sys.argv[1:], '-q'])\n"
        "assert done.exit_code == 0, done.output\n"
        "print('matplotlib' in sys.modules)\n"
    )
    picture = ["reliability", str(data), "--plot", str(tmp_path / "r.svg")]
    done = subprocess.run(
        [sys.executable, "-c", code, *picture], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
