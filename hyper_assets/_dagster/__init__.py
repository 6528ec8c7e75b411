"""The Dagster glue: the IO manager, what an output or input targets, guards, metadata,
sensors."""
