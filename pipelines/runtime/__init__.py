"""What the local pipeline runners use at run time, beside the pipeline definitions.

* :mod:`pipelines.runtime.console`: the quiet console of a local run (one line per
  component and epoch, the full log in a file).
* :mod:`pipelines.runtime.mlmd_connection`: ML Metadata as a SQLite file or on a
  MySQL/MariaDB server (``--mlmd`` URIs, the password kept out of logs).
* :mod:`pipelines.runtime.mlmd_utils`: small MLMD queries for the runners and the tests.
"""
