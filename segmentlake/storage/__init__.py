"""The datasource tables, one Delta table per datasource: what the engines (ingest, compact,
the coordinator) and the reads do to them. Above the metadata store, below the engines.

One concept per module: the visible-row scans (``visible_rows``), where a segment's rows are
(``segment_keys``), the table's files (``table_files``) and their physical removal
(``deletion``). The hidden column names are the pure core's (``segmentlake.core.names``).
"""
