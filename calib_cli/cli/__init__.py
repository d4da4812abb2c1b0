"""The ``calib`` command line: Typer wiring only.

Each command module reads as options -> workflow -> report: it builds the workflow's request
from its options, runs the workflow (:mod:`calib_cli.workflows`), and renders the typed result
(:mod:`calib_cli.report`) on the session's consoles. :mod:`~calib_cli.cli.session` is the one
place where errors become exit codes. Workflows and reports are imported inside the commands,
so that ``calib --help`` never imports SciPy.
"""

from __future__ import annotations

from calib_cli.cli.app import app, main

__all__ = ["app", "main"]
