"""Tableau publishing, client side: the REST client, action batches, the incremental
publish, its Dagster assets and data quality warnings. The server side, the REST
emulator, is `hyper_assets.emulator`."""
