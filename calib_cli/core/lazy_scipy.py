"""SciPy's optimisers, imported on first use.

Importing ``scipy.optimize`` takes about 0.3 s, a quarter of a command's start-up, and most
runs of a command that can fit never call it (a usage error, applying a saved model, a run
that fails on its input). These wrappers have the signatures and results of the SciPy
functions they name.

>>> float(brentq(lambda x: x * x - 2.0, 0.0, 2.0))  # doctest: +ELLIPSIS
1.41421356237...
"""

from __future__ import annotations

from typing import Any

__all__ = ["brentq", "isotonic_regression", "minimize"]


def isotonic_regression(*args: Any, **kwargs: Any) -> Any:
    """:func:`scipy.optimize.isotonic_regression`."""
    from scipy.optimize import isotonic_regression as solve

    return solve(*args, **kwargs)


def brentq(*args: Any, **kwargs: Any) -> Any:
    """:func:`scipy.optimize.brentq`."""
    from scipy.optimize import brentq as solve

    return solve(*args, **kwargs)


def minimize(*args: Any, **kwargs: Any) -> Any:
    """:func:`scipy.optimize.minimize`."""
    from scipy.optimize import minimize as solve

    return solve(*args, **kwargs)
