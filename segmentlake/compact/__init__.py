"""Engines that rewrite or remove segments after ingestion: compaction and kill."""
