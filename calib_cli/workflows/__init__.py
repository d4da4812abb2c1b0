"""One workflow per command: plan it, run it on tables (read and written through
:mod:`calib_cli.io`) with the numerics of :mod:`calib_cli.core`, and return a typed, frozen
result. No Typer and no Rich: workflows are tested in-process, and warnings go to a
:data:`~calib_cli.types.Warn` callback."""
