"""The asset checks: keys, nulls, row counts, publish freshness."""
