"""SQL for warehouse engines: calibrators, the sampling rule and the summary query.

Pure functions from calib's artifacts and options to SQL text, one dialect at a time
(:mod:`~calib_cli.sql.dialects`: DuckDB, Spark, BigQuery, Snowflake, Postgres), built as a
small expression tree (:mod:`~calib_cli.sql.tree`) rendered per dialect:

* :mod:`~calib_cli.sql.calibrators`: a saved calibrator or chain as one expression of the
  score (``calib export-sql``);
* :mod:`~calib_cli.sql.sampling`: the rows ``calib resample`` keeps, with ``calib-hash64-v1``
  in exact integer arithmetic under each engine's default settings (``--emit-sql``);
* :mod:`~calib_cli.sql.summary`: one ``GROUP BY`` whose result is a calib summary
  (``calib summarize --emit-sql``);
* :mod:`~calib_cli.sql.values` and :mod:`~calib_cli.sql.names`: a label read by calib's
  ``--positive-label`` rule, and the text calib gives a column that names rows (``--by``,
  ``--strata-col``), whatever the column's type (the emitters know table names, not types).
"""
