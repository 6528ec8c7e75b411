"""The data model Tableau builds from a published file's keys, and the tree we publish.

Tableau Server (2021.4 and later) and Tableau Cloud make a published `.hyper` file's data
model from its ASSUMED foreign keys, a relationship per key, and take only "simple
relationship trees" (Tableau's hyper-api-samples, publish-multi-table): one fact table,
every other table reached from it once. A file that is not one refused: "Could not make
a data source from the given Hyper file: it must contain exactly one fact table"
(400000). Users report the refusal for a table referenced by several tables; two keys
from one table to one dimension are our cautious reading (a relationship joins a pair of
tables once).

A warehouse is rarely a tree: facts share dimensions, a fact holds two keys to one
dimension (a role-playing dimension: origin and destination airport), a snowflake
reaches a dimension directly and through another dimension. `data_model` makes the tree
Tableau takes from the keys of the tables one data source holds (keys to tables it does
not hold do not count):

- the fact is the one table no foreign key of the held tables references;
- walking the keys from the fact, each way a table is reached is a table of the tree:
  a table reached once keeps its name, a table reached several ways is copied once per
  way, each copy named for its role, the key columns that reach it from the fact
  (`airports (origin)`, `airports (dest)`; `customer_address (ss_customer_sk.c_addr_sk)`);
- every relationship is kept, between the copies;
- several facts, a cycle of keys, a table the fact does not reach, or a tree of more than
  `MAX_TABLES` tables is a `DataModelError` before anything is sent;
- so is a key declared in metadata between two held tables that the file lacks
  (`hyper_assets._rows.pending_keys`), naming the key and why; `read_model` returns such keys
  to tables the data source does not hold, for a warning.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from tableauhyperapi import Connection, TableName

from hyper_assets._engine.tables import Catalog, ForeignKey, Keys, table_label
from hyper_assets._rows.pending_keys import MissingKey, PendingKey, missing_keys, stored_keys
from hyper_assets.errors import ConfigurationError, DataModelError, TableauRequestError

#: Words of the reply a server gives to a file that is not one star.
SERVER_REFUSAL = "exactly one fact table"

#: The most tables a data source's tree may hold, its copies included: past it, the keys
#: most likely fan out through many paths, and the copy would be larger than useful.
MAX_TABLES = 64


@dataclass(frozen=True)
class Relationship:
    """`columns` of `table` reference `ref_columns` of `dimension`: a relationship in
    Tableau, between tables of the published file (copies named for their role)."""

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
    """One tree: the fact, and a relationship to each other table of the published file.

    `copies` maps each table of the published file that is a copy (a role) to the file's
    table it copies; every other table is published under its own name.
    """

    fact: TableName
    relationships: tuple[Relationship, ...] = ()
    copies: Mapping[TableName, TableName] = field(default_factory=dict)

    @property
    def tables(self) -> tuple[TableName, ...]:
        """The published tables: the fact first, then each dimension in the order reached."""
        return (self.fact, *(r.dimension for r in self.relationships))

    def source(self, published: TableName) -> TableName:
        """The file's table a published table holds the rows of."""
        return self.copies.get(published, published)

    def published(self, table: TableName) -> tuple[TableName, ...]:
        """The published tables holding the rows of the file's `table` (its copies)."""
        return tuple(t for t in self.tables if self.source(t) == table)


def data_model(
    keys: Mapping[TableName, Keys],
    datasource: str,
    *,
    chosen: bool = False,
    missing: Sequence[MissingKey] = (),
) -> DataModel:
    """The tree published for a data source holding the tables of `keys`; `DataModelError`
    if there is none, or if a key declared between them is `missing` from the file.
    `chosen`: the tables were named (`tables=`), which the advice says."""
    held = list(keys)
    if not held:
        raise ConfigurationError(f"Data source {datasource!r} holds no table; give it one.")
    absent = [m for m in missing if m.key.table in keys]
    if any(m.key.key.ref_table in keys for m in absent):
        raise _refusal(datasource, "", _MISSING, missing=absent)
    edges = {
        t: [fk for fk in keys[t].foreign_keys if fk.ref_table in keys and fk.ref_table != t]
        for t in held
    }
    referenced = {fk.ref_table for fks in edges.values() for fk in fks}
    facts = [t for t in held if t not in referenced]
    if not facts:
        raise _refusal(
            datasource, f"its keys form a cycle ({_cycle(edges)})", _CYCLE, missing=absent
        )
    if len(facts) > 1:
        labels = ", ".join(table_label(f) for f in facts)
        raise _refusal(
            datasource,
            f"it holds {len(facts)} fact tables (referenced by no foreign key): {labels}",
            _NAMED if chosen else _ONE_PER_FACT,
            facts=facts,
            missing=absent,
        )
    fact = facts[0]
    paths = list(_paths(fact, edges, datasource))
    reached = {fact, *(path[-1].ref_table for path in paths)}
    unreachable = [t for t in held if t not in reached]
    if unreachable:
        labels = ", ".join(table_label(t) for t in unreachable)
        raise _refusal(
            datasource,
            f"no foreign key path from its fact {table_label(fact)} reaches {labels}",
            _UNREACHED_NAMED if chosen else _UNREACHED,
            facts=facts,
            unreachable=unreachable,
            missing=absent,
        )
    ways = Counter(path[-1].ref_table for path in paths)
    names = {(): fact} | {
        path: _role(path) if ways[path[-1].ref_table] > 1 else path[-1].ref_table for path in paths
    }
    taken = Counter(names.values())
    clashing = sorted(
        {
            table_label(n)
            for p, n in names.items()
            if p and n != p[-1].ref_table and (n in keys or taken[n] > 1)
        }
    )
    if clashing:
        raise _refusal(
            datasource,
            f"two of its tables would be named {', '.join(clashing)} (a role copy is named "
            "for the key columns that reach it)",
            "Rename a table or a key column.",
        )
    relationships = tuple(
        Relationship(names[path[:-1]], path[-1].columns, names[path], path[-1].ref_columns)
        for path in paths
    )
    copies = {names[p]: p[-1].ref_table for p in paths if names[p] != p[-1].ref_table}
    return DataModel(fact, relationships, copies)


def _paths(
    fact: TableName, edges: Mapping[TableName, Sequence[ForeignKey]], datasource: str
) -> Iterator[tuple[ForeignKey, ...]]:
    """Each way the keys reach a table from `fact`, as the keys walked, depth first."""
    count = 1
    stack: list[tuple[ForeignKey, ...]] = [()]
    while stack:
        path = stack.pop()
        if path:
            yield path
        table = path[-1].ref_table if path else fact
        on_path = [fact, *(fk.ref_table for fk in path)]
        for fk in reversed(edges[table]):
            if fk.ref_table in on_path:
                cycle = _loop(on_path, fk.ref_table)
                raise _refusal(datasource, f"its keys form a cycle ({cycle})", _CYCLE)
            count += 1
            if count > MAX_TABLES:
                raise _refusal(
                    datasource,
                    f"the tree from its fact {table_label(fact)} would hold more than "
                    f"{MAX_TABLES} tables (a copy for each way a table is reached)",
                    "Publish fewer dimensions with tables=[...], or drop keys between dimensions.",
                )
            stack.append((*path, fk))


def _role(path: tuple[ForeignKey, ...]) -> TableName:
    """The copy of `path`'s last table for the role the path plays: named for the key
    columns that reach it from the fact."""
    table = path[-1].ref_table
    role = ".".join("+".join(fk.columns) for fk in path)
    return TableName(table.schema_name, f"{table.name.unescaped} ({role})")


def _cycle(edges: Mapping[TableName, Sequence[ForeignKey]]) -> str:
    """A cycle of keys among tables every one of which is referenced, as `a -> b -> a`
    (there is one: a walk along keys never ends, and the tables are finite)."""

    def walk(path: list[TableName]) -> str | None:
        for fk in edges[path[-1]]:
            if fk.ref_table in path:
                return _loop(path, fk.ref_table)
            found = walk([*path, fk.ref_table])
            if found:
                return found
        return None

    return next(found for table in edges if (found := walk([table])))


def _loop(path: Sequence[TableName], back_to: TableName) -> str:
    """The cycle `path` closes by reaching `back_to` again, as `a -> b -> a`."""
    loop = [*path[path.index(back_to) :], back_to]
    return " -> ".join(table_label(t) for t in loop)


_NOTHING_SENT = " Nothing was sent."
_CYCLE = "Drop one of these keys."
_MISSING = "Do what each key's reason says (the write of either table adds it), then publish again."
_ONE_PER_FACT = (
    "Publish one data source per fact: tableau_datasource_asset(..., tables=[fact, "
    "its dimensions])."
)
_NAMED = "Keep one fact in its tables=[...], or declare the key that joins them."
_UNREACHED = "Declare a key to them, or publish them in a data source of their own."
_UNREACHED_NAMED = "Declare a key to them, or leave them out of tables=[...]."


def _refusal(
    datasource: str,
    why: str,
    way_out: str,
    *,
    facts: Sequence[TableName] = (),
    unreachable: Sequence[TableName] = (),
    missing: Sequence[MissingKey] = (),
) -> DataModelError:
    """The refusal: `why` (and the declared keys `missing` from the file, with their
    reasons), then the `way_out`."""
    reasons = [why] if why else []
    if missing:
        listed = "; ".join(str(m) for m in missing)
        reasons.append(f"foreign keys declared in metadata are not in the file: {listed}")
        if way_out != _MISSING:
            way_out = f"{_MISSING} {way_out}"
    return DataModelError(
        f"Data source {datasource!r} cannot be one tree, which Tableau requires: "
        f"{'; and '.join(reasons)}. {way_out}{_NOTHING_SENT}",
        facts=[table_label(f) for f in facts],
        unreachable=[table_label(t) for t in unreachable],
        missing=[str(m.key) for m in missing],
    )


def preview(keys: Mapping[TableName, Keys], datasource: str, *, chosen: bool) -> str:
    """What a publish of the tables of `keys` will do, as its asset's `data_model` shows it
    before any run: the tree (`describe`), or the refusal the run raises, both from
    `data_model`, which the run calls on the file's keys (`read_model`)."""
    try:
        model = data_model(keys, datasource, chosen=chosen)
    except DataModelError as error:
        return f"Would refuse: {str(error).removesuffix(_NOTHING_SENT)}"
    return describe(model)


def describe(model: DataModel) -> str:
    """The tree as Markdown: the fact, then each dimension (or copy) and the key that joins it."""
    lines = [
        "| Table | Role | Joined by |",
        "|---|---|---|",
        f"| {table_label(model.fact)} | fact | |",
        *(
            f"| {table_label(r.dimension)} | {_role_of(model, r.dimension)} | {r} |"
            for r in model.relationships
        ),
    ]
    return "\n".join(lines)


def _role_of(model: DataModel, table: TableName) -> str:
    source = model.source(table)
    return "dimension" if source == table else f"copy of {table_label(source)}"


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
    *,
    chosen: bool,
    declared: Sequence[PendingKey] = (),
) -> tuple[DataModel, list[MissingKey]]:
    """The tree of the `tables` of the connection's database, whose declared keys not in
    the file yet are `pending`, and whose assets' metadata declares the foreign keys
    `declared` (the keys the publish asset's `data_model` shows); `DataModelError` if there
    is none, naming a declared key the file lacks. Also the keys of these tables that are
    missing, each to a table the data source does not hold (a warning). `chosen`: the data
    source names its tables."""
    stored = stored_keys(Catalog(connection))
    missing = [m for m in missing_keys(pending, stored, declared) if m.key.table in tables]
    model = data_model({t: stored[t] for t in tables}, datasource, chosen=chosen, missing=missing)
    return model, missing


def server_refusal(error: TableauRequestError, datasource: str) -> DataModelError | None:
    """A server's 400000 "exactly one fact table" reply as the error the local check raises;
    None for any other reply."""
    if error.code != "400000" or SERVER_REFUSAL not in error.detail:
        return None
    return DataModelError(
        f"Tableau refused data source {datasource!r}: {error}. The server does not take the "
        "tree this library made (docs/publishing.md states the rule): publish fewer tables "
        "with tableau_datasource_asset(..., tables=[...]). Nothing was changed here.",
        facts=[],
        unreachable=[],
    )
