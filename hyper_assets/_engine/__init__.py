"""The Hyper engine: one hyperd per process, SQL, the catalog, types, compaction and file
versions."""
