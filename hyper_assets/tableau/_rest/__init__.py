"""Tableau's REST API: transport, sign-in, replies, projects, jobs, downloads, data quality
warnings."""
