"""Fixed data models, judged by both sides from the same hand-written table: the client's
`data_model` makes the tree it publishes (or refuses the file), and the emulator's
`is_one_tree` judges the raw file (a tree or not) and the tree the client published.

Each model is its tables and foreign keys, every key one column referencing the
dimension's `id` (schema Extract). A tree is what Tableau takes for one data source:
one fact, each other table reached once.
"""

from __future__ import annotations

import pytest
from tableauhyperapi import TableName

from hyper_assets._engine.tables import ForeignKey, Keys
from hyper_assets.emulator.catalog import FileKeys
from hyper_assets.emulator.model import is_one_tree
from hyper_assets.errors import DataModelError
from hyper_assets.tableau._publish.model import data_model

Model = dict[str, list[tuple[str, str]]]  # table -> its keys: (column, dimension)

#: name: (model, the tables the client publishes or the refusal it says, raw is a tree)
VECTORS: dict[str, tuple[Model, set[str] | str, bool]] = {
    "one table": ({"sales": []}, {"sales"}, True),
    "a star": (
        {"sales": [("product", "products"), ("store", "stores")], "products": [], "stores": []},
        {"sales", "products", "stores"},
        True,
    ),
    "a snowflake": (
        {"sales": [("product", "products")], "products": [("brand", "brands")], "brands": []},
        {"sales", "products", "brands"},
        True,
    ),
    "a fact with two keys to one dimension": (
        {"flights": [("origin", "airports"), ("dest", "airports")], "airports": []},
        {"flights", "airports (origin)", "airports (dest)"},
        False,
    ),
    "a snowflake reaching a dimension twice": (
        {
            "lineitem": [("part", "part"), ("supplier", "supplier")],
            "part": [("nation", "nation")],
            "supplier": [("nation", "nation")],
            "nation": [],
        },
        {"lineitem", "part", "supplier", "nation (part.nation)", "nation (supplier.nation)"},
        False,
    ),
    "two facts sharing a dimension": (
        {"sales": [("store", "stores")], "returns": [("store", "stores")], "stores": []},
        "2 fact tables",
        False,
    ),
    "a cycle": (
        {"a": [("b", "b")], "b": [("a", "a")]},
        "cycle",
        False,
    ),
}


def name(table: str) -> TableName:
    return TableName("Extract", table)


def client_keys(model: Model) -> dict[TableName, Keys]:
    referenced = {dimension for keys in model.values() for _, dimension in keys}
    return {
        name(table): Keys(
            ("id",) if table in referenced else (),
            tuple(ForeignKey((column,), name(dim), ("id",)) for column, dim in keys),
        )
        for table, keys in model.items()
    }


def file_keys(tables: list[str], references: list[tuple[str, str]]) -> FileKeys:
    """The emulator's view of a file of `tables` whose keys make `references`."""
    referenced = {dim for _, dim in references}
    return FileKeys(
        tuple(("Extract", t) for t in tables),
        {("Extract", t): ("id",) for t in tables if t in referenced},
        tuple((("Extract", t), ("Extract", d)) for t, d in references),
    )


@pytest.mark.parametrize("vector", VECTORS, ids=str)
def test_the_emulator_judges_the_raw_file(vector: str) -> None:
    model, _, tree = VECTORS[vector]
    references = [(table, dim) for table, keys in model.items() for _, dim in keys]
    assert is_one_tree(file_keys(list(model), references)) is tree


@pytest.mark.parametrize("vector", VECTORS, ids=str)
def test_the_client_publishes_a_tree_the_emulator_takes_or_refuses(vector: str) -> None:
    model, expected, _ = VECTORS[vector]
    if isinstance(expected, str):
        with pytest.raises(DataModelError, match=expected):
            data_model(client_keys(model), "DS")
        return
    published = data_model(client_keys(model), "DS")
    tables = [t.name.unescaped for t in published.tables]
    assert set(tables) == expected and len(tables) == len(expected)
    references = [
        (r.table.name.unescaped, r.dimension.name.unescaped) for r in published.relationships
    ]
    assert is_one_tree(file_keys(tables, references))
