"""The check a server makes of a published `.hyper` file's data model (Tableau 2021.4+).

The server builds the data source's model from the file's ASSUMED foreign keys and
refuses a file with several tables that are not one tree with 400000 and the message
users report (docs/publishing.md states the rule, and which parts of it are reports and
which our reading). One table of any name is always taken.

This is the server's side: it judges the file as it came, and does not share the
client's code that builds the tree (`hyper_assets.tableau.model`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tableauhyperapi import Connection, Endpoint, HyperException, TableName

from hyper_assets.emulator.wire import bad_request
from hyper_assets.errors import HyperFileError
from hyper_assets.tables import Catalog, Keys

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
            catalog = Catalog(connection)
            keys = {table: catalog.keys(table) for table in catalog.tables()}
    except (HyperException, HyperFileError):  # Catalog maps Hyper's errors to ours
        return
    if len(keys) > 1 and not is_one_tree(keys):
        raise bad_request(REFUSAL)


def is_one_tree(keys: dict[TableName, Keys]) -> bool:
    """One fact (a table no key of the file references); every other table referenced by
    one key of the file, and reached from the fact."""
    references = [
        (table, fk.ref_table)
        for table, table_keys in keys.items()
        for fk in table_keys.foreign_keys
        if fk.ref_table in keys and fk.ref_table != table
    ]
    incoming = Counter(dimension for _, dimension in references)
    facts = [table for table in keys if not incoming[table]]
    if len(facts) != 1 or any(count > 1 for count in incoming.values()):
        return False
    reached, frontier = {facts[0]}, [facts[0]]
    while frontier:
        table = frontier.pop()
        for source, dimension in references:
            if source == table and dimension not in reached:
                reached.add(dimension)
                frontier.append(dimension)
    return reached == set(keys)
