"""Tableau publishing: the REST client, action batches, incremental publish, emulation."""
