"""Rows in and out of the file: frames, staging, the transfer from Spark, the ingest,
loads, the outbox."""
