"""The galaxy's data sources: one per fact, each holding the tables its fact's keys reach.

`orders` is a fact of its own data source and a dimension of `lineitem`'s: the file holds
it once, and a change of it goes to both.
"""

import os

import dagster as dg

from hyper_assets import tableau_datasource_asset
from tpch.assets import customer, lineitem, nation, orders, part, partsupp, region, supplier

#: A project name or path ("Sales/EMEA"); the built-in project of a site is "Default".
PROJECT = os.environ.get("TABLEAU_PROJECT", "Default")

#: Each data source's tables, its fact first.
TABLES: dict[str, list[dg.AssetsDefinition]] = {
    "Line items": [lineitem, orders, customer, nation, region, part, supplier],
    "Supply": [partsupp, part, supplier, nation, region],
    "Orders": [orders, customer, nation, region],
}

DATASOURCES = [
    tableau_datasource_asset(
        datasource=name,
        project=PROJECT,
        key=["tableau", name.lower().replace(" ", "_")],
        deps=tables,
        tables=tables,
        group_name="tableau",
    )
    for name, tables in TABLES.items()
]
