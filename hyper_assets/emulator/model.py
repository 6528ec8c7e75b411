"""The check a server makes of a published `.hyper` file's data model (Tableau 2021.4+).

The server builds the data source's model from the file's ASSUMED foreign keys and
refuses a file with several tables that are not one star with 400000 and the message
users report (`hyper_assets.tableau.model` states the rule, and which parts of it are
reports and which our reading). One table of any name is always taken.
"""

from __future__ import annotations

from pathlib import Path

from tableauhyperapi import Connection, Endpoint, HyperException

from hyper_assets.emulator.wire import bad_request
from hyper_assets.errors import DataModelError, HyperFileError
from hyper_assets.tableau.model import data_model
from hyper_assets.tables import Catalog

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
    if len(keys) > 1:
        try:
            data_model(keys, name)
        except DataModelError:
            raise bad_request(REFUSAL) from None
