"""The coordinator engine: retention rules, segment loading and balancing across the storage
tiers' volumes (Druid's coordinator duties), on Spark and the metadata store."""
