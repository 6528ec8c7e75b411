"""The publish as Dagster assets: the resource, the assets, the quality sensor, the
translator."""
