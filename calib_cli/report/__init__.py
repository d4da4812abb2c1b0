"""Reports: JSON payloads (:mod:`~calib_cli.report.payloads`, every key defined once) and Rich
tables (:mod:`~calib_cli.report.tables`), both built from the workflows' typed results.

Nothing here prints: the CLI owns the consoles. The two modules are imported by name, so that
building a payload never imports Rich.
"""
