"""SciPy's special functions, imported on first use.

Importing :mod:`scipy.special` takes about 0.2 s (SciPy's array-API layer imports parts of
NumPy that nothing else here needs). A command that streams a large file needs them only for
its figures, after the pass: :func:`import_in_background` starts the import when the pass
starts, in a thread, and :func:`special` then finds it done (Python's import lock makes a
caller wait for an import under way, never import twice).
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
from types import ModuleType

__all__ = ["import_in_background", "special"]


@functools.cache
def special() -> ModuleType:
    """:mod:`scipy.special`, imported on the first call.

    >>> special().ndtr(0.0)
    np.float64(0.5)
    """
    return importlib.import_module("scipy.special")


def import_in_background() -> None:
    """Start importing :mod:`scipy.special` in a daemon thread, unless it is imported."""
    if "scipy.special" not in sys.modules:
        threading.Thread(target=special, name="calib-import", daemon=True).start()
