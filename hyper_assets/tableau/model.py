"""The data model Tableau builds from a published file's keys, and the rule it must follow.

Tableau Server (2021.4 and later) and Tableau Cloud make a published `.hyper` file's data
model from its ASSUMED foreign keys, a relationship per key, and refuse a file whose keys
do not form one star: "Could not make a data source from the given Hyper file: it must
contain exactly one fact table" (400000). The rule, as `data_model` applies it to the
tables one data source holds (keys to tables it does not hold do not count):

- one table is always a model;
- the fact is the one table that no foreign key references; every other table is
  reachable from it through foreign keys (so there is no cycle). Reported by users;
- a table referenced by several tables is refused (a second report);
- two foreign keys from one table to the same dimension (a role-playing dimension, such as
  origin and destination airport) are refused: nothing shows how a server models them,
  Tableau's relationships join a pair of tables once, and this is the cautious reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tableauhyperapi import Connection, TableName

from hyper_assets.errors import ConfigurationError, DataModelError, TableauRequestError
from hyper_assets.tables import Catalog, Keys, table_label

#: Words of the reply a server gives to a file that is not one star.
SERVER_REFUSAL = "exactly one fact table"


@dataclass(frozen=True)
class Relationship:
    """`columns` of `table` reference `ref_columns` of `dimension`: a relationship in Tableau."""

    table: TableName
    columns: tuple[str, ...]
    dimension: TableName
    ref_columns: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"{table_label(self.table)}.{', '.join(self.columns)} -> "
            f"{table_label(self.dimension)}.{', '.join(self.ref_columns)}"
        )


@dataclass(frozen=True)
class DataModel:
    """One star (or snowflake): the fact, and a relationship to each other table."""

    fact: TableName
    relationships: tuple[Relationship, ...] = ()

    @property
    def tables(self) -> tuple[TableName, ...]:
        """The fact first, then each dimension in the order it is reached."""
        return (self.fact, *(r.dimension for r in self.relationships))


def data_model(keys: Mapping[TableName, Keys], datasource: str) -> DataModel:
    """The model of a data source holding the tables of `keys`; `DataModelError` if none."""
    held = list(keys)
    relationships = [
        Relationship(table, fk.columns, fk.ref_table, fk.ref_columns)
        for table, table_keys in keys.items()
        for fk in table_keys.foreign_keys
        if fk.ref_table in keys and fk.ref_table != table
    ]
    incoming = {t: [r for r in relationships if r.dimension == t] for t in held}
    facts = [t for t in held if not incoming[t]]
    problems = []
    for dimension, refs in incoming.items():
        sources = list(dict.fromkeys(r.table for r in refs))
        for source in sources:
            roles = [r for r in refs if r.table == source]
            if len(roles) > 1:
                problems.append(
                    f"{' and '.join(str(r) for r in roles)} are two keys from one table to the "
                    f"same dimension (a role-playing dimension), which Tableau's relationships "
                    f"do not model: give the second role a dimension table of its own (a "
                    f"second table with the rows of {table_label(dimension)}), or drop one "
                    "of the keys"
                )
        if len(sources) > 1:
            problems.append(
                f"{table_label(dimension)} is referenced by several tables "
                f"({', '.join(table_label(s) for s in sources)}), which servers refuse"
            )
    reached = _reachable(facts[0], relationships) if len(facts) == 1 else set()
    unreachable = [t for t in held if t not in reached] if len(facts) == 1 else []
    if len(held) > 1 and (len(facts) != 1 or unreachable or problems):
        raise _refusal(datasource, held, facts, unreachable, problems, relationships)
    if not held:
        raise ConfigurationError(f"Data source {datasource!r} holds no table; give it one.")
    by_dimension = {r.dimension: r for r in relationships}
    order = sorted(reached - {facts[0]}, key=held.index)
    return DataModel(facts[0], tuple(by_dimension[t] for t in order))


def describe(model: DataModel) -> str:
    """The model as Markdown: the fact, then each dimension and the key that joins it."""
    lines = [
        "| Table | Role | Joined by |",
        "|---|---|---|",
        f"| {table_label(model.fact)} | fact | |",
        *(f"| {table_label(r.dimension)} | dimension | {r} |" for r in model.relationships),
    ]
    return "\n".join(lines)


def _reachable(fact: TableName, relationships: Sequence[Relationship]) -> set[TableName]:
    reached, frontier = {fact}, [fact]
    while frontier:
        table = frontier.pop()
        for r in relationships:
            if r.table == table and r.dimension not in reached:
                reached.add(r.dimension)
                frontier.append(r.dimension)
    return reached


def _refusal(
    datasource: str,
    held: list[TableName],
    facts: list[TableName],
    unreachable: list[TableName],
    problems: list[str],
    relationships: list[Relationship],
) -> DataModelError:
    labels = [table_label(t) for t in held]
    found = [
        f"fact tables (referenced by no foreign key): {', '.join(table_label(f) for f in facts)}"
        if facts
        else "no fact table (every table is referenced by a foreign key: a cycle)"
    ]
    if unreachable:
        found.append(
            f"tables no foreign key path reaches from the fact: "
            f"{', '.join(table_label(t) for t in unreachable)}"
        )
    stars = [
        "tables=[" + ", ".join(repr(t.name.unescaped) for t in _star(fact, relationships)) + "]"
        for fact in facts
    ]
    fix = (
        "Publish each star as a data source of its own, holding its fact and the dimensions "
        "it reaches, with tableau_datasource_asset(..., tables=[...])"
        + (f" (here {' and '.join(stars)})" if len(stars) > 1 else "")
        + ", or declare the foreign keys that make the tables one star."
    )
    return DataModelError(
        f"Data source {datasource!r} would hold tables {', '.join(labels)}, which are not one "
        f'star, and Tableau refuses such a file ("it must contain {SERVER_REFUSAL}"): '
        + "; ".join(found + problems)
        + f". {fix} Nothing was sent.",
        facts=[table_label(f) for f in facts],
        unreachable=[table_label(t) for t in unreachable],
    )


def _star(fact: TableName, relationships: Sequence[Relationship]) -> list[TableName]:
    reached = _reachable(fact, relationships)
    return [fact, *sorted(reached - {fact}, key=table_label)]


def held_tables(catalog: Catalog, names: Sequence[str] | None, datasource: str) -> list[TableName]:
    """The file's tables a data source holds: all of them without `names`, else those named.

    A name is `table` or `schema.table`; one naming no table of the file, or several, is a
    `ConfigurationError`.
    """
    tables = catalog.tables()
    if names is None:
        return tables
    held = []
    for name in names:
        found = [t for t in tables if name in (table_label(t), t.name.unescaped)]
        if len(found) != 1:
            raise ConfigurationError(
                f"tables= of data source {datasource!r} names {name!r}, which is "
                + ("not a table of the file" if not found else "several tables of the file")
                + f"; its tables are {', '.join(table_label(t) for t in tables) or 'none yet'}. "
                "Name a table as 'table' or 'schema.table'."
            )
        if found[0] not in held:
            held.append(found[0])
    return held


def read_model(connection: Connection, tables: Sequence[TableName], datasource: str) -> DataModel:
    """The model of the `tables` of the connection's database; `DataModelError` if none."""
    catalog = Catalog(connection)
    return data_model({t: catalog.keys(t) for t in tables}, datasource)


def server_refusal(error: TableauRequestError, datasource: str) -> DataModelError | None:
    """A server's 400000 "exactly one fact table" reply as the error the local check raises;
    None for any other reply."""
    if error.code != "400000" or SERVER_REFUSAL not in error.detail:
        return None
    return DataModelError(
        f"Tableau refused data source {datasource!r}: {error}. Its tables do not form one star "
        "as the server reads their keys: publish each star as a data source of its own with "
        "tableau_datasource_asset(..., tables=[...]). Nothing was changed here.",
        facts=[],
        unreachable=[],
    )
