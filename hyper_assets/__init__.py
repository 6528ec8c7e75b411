"""hyper-assets: Tableau .hyper extracts as Dagster assets, written from Spark."""
