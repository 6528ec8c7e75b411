"""The check a server makes of a published `.hyper` file's data model (Tableau 2021.4+).

The server builds the data source's model from the file's ASSUMED foreign keys and
refuses a file with several tables that are not one tree with 400000 and the message
users report (docs/publishing.md states the rule, and which parts of it are reports and
which our reading). One table of any name is always taken.

This is the server's side: it judges the file as it came, reading the keys with its own
`hyper_assets.emulator.catalog`, and shares neither the client's code that builds the tree
(`hyper_assets.tableau._publish.model`) nor its catalog reading (`hyper_assets._engine.tables`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tableauhyperapi import Connection, Endpoint, HyperException

from hyper_assets.emulator.catalog import FileKeys, read_keys
from hyper_assets.emulator.wire import bad_request

#: The reply's detail, as users report it from Tableau Server and Tableau Cloud.
REFUSAL = (
    "Could not make a data source from the given Hyper file: it must contain exactly one "
    "fact table."
)


def check_model(endpoint: Endpoint, path: Path, name: str) -> None:
    """Raises 400000 when the tables of the file at `path` are not one star.

    Bytes Hyper cannot open are let through, stored as they came (the emulator never
    checked a file's content beyond this).
    """
    try:
        with Connection(endpoint, path) as connection:
            keys = read_keys(connection)
    except HyperException:
        return
    if len(keys.tables) > 1 and not is_one_tree(keys):
        raise bad_request(REFUSAL)


def is_one_tree(keys: FileKeys) -> bool:
    """One fact (a table no key of the file references); every other table referenced by
    one key of the file, and reached from the fact."""
    tables = set(keys.tables)
    references = [
        (table, dimension)
        for table, dimension in keys.references
        if dimension in tables and dimension != table
    ]
    incoming = Counter(dimension for _, dimension in references)
    facts = [table for table in keys.tables if not incoming[table]]
    if len(facts) != 1 or any(count > 1 for count in incoming.values()):
        return False
    reached, frontier = {facts[0]}, [facts[0]]
    while frontier:
        table = frontier.pop()
        for source, dimension in references:
            if source == table and dimension not in reached:
                reached.add(dimension)
                frontier.append(dimension)
    return reached == tables
