"""The picture formats of ``--plot``, apart from :mod:`calib_cli.report.plots` so that the
workflows check a path before any work without loading matplotlib."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from calib_cli.errors import UsageError

__all__ = ["PLOT_FORMATS", "PLOT_NEEDS", "plot_format"]

#: Picture formats, by extension.
PLOT_FORMATS: Mapping[str, str] = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
#: The usage error of ``--plot`` without matplotlib.
PLOT_NEEDS = "--plot needs matplotlib: pip install 'calib-cli[plot]'"


def plot_format(path: str) -> str:
    """The picture format a path's extension names (``png``, ``svg`` or ``pdf``).

    >>> plot_format("out/reliability.SVG")
    'svg'
    """
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_FORMATS:
        shown = f"'{suffix}'" if suffix else "no extension"
        raise UsageError(f"--plot {path}: {shown} is not a picture format; use .png, .svg or .pdf")
    return PLOT_FORMATS[suffix]
