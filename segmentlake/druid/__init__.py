"""Druid's task JSON, apart from the domain core: the native batch task (``ingest_task``), its
validating reader (``ingest_task_reader``), its input source and formats (``input``) and the reasons
the keys that only steer Druid's own processes have no effect on Spark (``no_effect``).

The package sits just above the pure core: it imports the core and the errors, never Spark,
the metadata store, the engines or the surfaces, and nothing in the core imports it. The
runner, which reads a task's files with Spark and ingests them into a ``Lake``, is the surface
module :mod:`segmentlake.druid_runner`.
"""
