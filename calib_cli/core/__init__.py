"""The numeric core: pure functions on NumPy arrays and frozen result dataclasses.

Nothing in this package reads files, prints, or imports Polars, Rich or Typer.
"""
