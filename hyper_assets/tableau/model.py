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

A key declared in metadata that the file lacks (`hyper_assets.pending_keys`) between two
tables of the data source refuses it too, naming the key and why; so does no star
otherwise, naming the missing keys of its tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tableauhyperapi import Connection, TableName

from hyper_assets.errors import ConfigurationError, DataModelError, TableauRequestError
from hyper_assets.pending_keys import MissingKey, PendingKey, missing_keys, stored_keys
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


def data_model(
    keys: Mapping[TableName, Keys], datasource: str, missing: Sequence[MissingKey] = ()
) -> DataModel:
    """The model of a data source holding the tables of `keys`; `DataModelError` if none,
    or if a key declared between them is `missing` from the file."""
    held = list(keys)
    missing = [m for m in missing if m.key.table in keys]
    shape = _Shape.of(keys)
    between = any(m.key.key.ref_table in keys for m in missing)
    if between or shape.refused:
        declared = _Shape.of(_with_missing(keys, missing))
        raise _refusal(datasource, held, shape, missing, declared)
    if not held:
        raise ConfigurationError(f"Data source {datasource!r} holds no table; give it one.")
    by_dimension = {r.dimension: r for r in shape.relationships}
    order = sorted(shape.reached - {shape.facts[0]}, key=held.index)
    return DataModel(shape.facts[0], tuple(by_dimension[t] for t in order))


@dataclass(frozen=True)
class _Shape:
    """What the keys between some tables make of them, and what keeps them from one star."""

    held: list[TableName]
    relationships: list[Relationship]
    facts: list[TableName]
    reached: set[TableName]
    unreachable: list[TableName]
    problems: list[str]

    @property
    def refused(self) -> bool:
        one_star = len(self.facts) == 1 and not self.unreachable and not self.problems
        return len(self.held) > 1 and not one_star

    @classmethod
    def of(cls, keys: Mapping[TableName, Keys]) -> _Shape:
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
                        f"{' and '.join(str(r) for r in roles)} are two keys from one table to "
                        f"the same dimension (a role-playing dimension), which Tableau's "
                        f"relationships do not model: give the second role a dimension table "
                        f"of its own (a second table with the rows of "
                        f"{table_label(dimension)}), or drop one of the keys"
                    )
            if len(sources) > 1:
                problems.append(
                    f"{table_label(dimension)} is referenced by several tables "
                    f"({', '.join(table_label(s) for s in sources)}), which servers refuse"
                )
        reached = _reachable(facts[0], relationships) if len(facts) == 1 else set()
        unreachable = [t for t in held if t not in reached] if len(facts) == 1 else []
        return cls(held, relationships, facts, reached, unreachable, problems)


def _with_missing(
    keys: Mapping[TableName, Keys], missing: Sequence[MissingKey]
) -> dict[TableName, Keys]:
    """`keys` with the `missing` keys added, and the tables they reference (keyed as they
    require): the tables as their metadata declares them, once the missing keys are in."""
    declared = {
        table: replace(
            table_keys,
            foreign_keys=table_keys.foreign_keys
            + tuple(m.key.key for m in missing if m.key.table == table),
        )
        for table, table_keys in keys.items()
    }
    for m in missing:
        declared.setdefault(m.key.key.ref_table, Keys(m.key.key.ref_columns))
    return declared


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
    shape: _Shape,
    missing: Sequence[MissingKey],
    declared: _Shape,
) -> DataModelError:
    """The refusal of tables of this `shape`, lacking the `missing` keys, whose `declared`
    shape (with them) says whether they would be one star."""
    labels = [table_label(t) for t in held]
    facts = shape.facts
    found = [
        f"fact tables (referenced by no foreign key): {', '.join(table_label(f) for f in facts)}"
        if facts
        else "no fact table (every table is referenced by a foreign key: a cycle)"
    ]
    if shape.unreachable:
        found.append(
            f"tables no foreign key path reaches from the fact: "
            f"{', '.join(table_label(t) for t in shape.unreachable)}"
        )
    fixes = []
    if missing:
        found.append(
            "foreign keys declared in metadata but not in the file: "
            + "; ".join(str(m) for m in missing)
        )
        fixes.append(
            "Do what each missing key's reason says: the write of either table adds it, "
            "then publish again."
        )
    if declared.refused:
        stars = [
            "tables=["
            + ", ".join(repr(t.name.unescaped) for t in _star(fact, declared.relationships))
            + "]"
            for fact in declared.facts
        ]
        fixes.append(
            ("Even with them, publish" if missing else "Publish")
            + " each star as a data source of its own, holding its fact and the "
            "dimensions it reaches, with tableau_datasource_asset(..., tables=[...])"
            + (f" (here {' and '.join(stars)})" if len(stars) > 1 else "")
            + ", or declare the foreign keys that make the tables one star."
        )
    return DataModelError(
        f"Data source {datasource!r} would hold tables {', '.join(labels)}, which are not one "
        f'star, and Tableau refuses such a file ("it must contain {SERVER_REFUSAL}"): '
        + "; ".join(found + shape.problems)
        + f". {' '.join(fixes)} Nothing was sent.",
        facts=[table_label(f) for f in facts],
        unreachable=[table_label(t) for t in shape.unreachable],
        missing=[str(m.key) for m in missing],
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


def read_model(
    connection: Connection,
    tables: Sequence[TableName],
    datasource: str,
    pending: Sequence[PendingKey],
) -> list[MissingKey]:
    """Checks the model of the `tables` of the connection's database, whose declared keys
    not in the file yet are `pending`: `DataModelError` if there is none. Returns the keys
    of these tables that are missing, each to a table the data source does not hold."""
    stored = stored_keys(Catalog(connection))
    missing = missing_keys(pending, stored)
    data_model({t: stored[t] for t in tables}, datasource, missing)
    return [m for m in missing if m.key.table in tables]


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
