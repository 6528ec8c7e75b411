"""What a publish asset declares from its `deps` and `tables`, when the definitions load:
the dependencies' metadata (checked), the tables the data source holds, the tree its
declared keys make (`data_model`), what the copy check reads, and column lineage (declared,
and after a publish from the file).
"""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from hyper_assets._dagster.located import Located
from hyper_assets._dagster.spec import DEFAULT_SCHEMA, TableSpec
from hyper_assets._engine.tables import Catalog
from hyper_assets._rows.pending_keys import PendingKey
from hyper_assets.errors import ConfigurationError, DataModelError
from hyper_assets.tableau._publish.model import data_model, preview

#: What `deps` takes: an asset (its definition or its spec), its key or `AssetDep`, or the
#: name of an asset of a one-part key; `tables` takes the same, a string there being a table
#: name.
AssetRef = dg.AssetsDefinition | dg.AssetSpec | dg.AssetKey | dg.AssetDep | str

#: A table a data source holds: named (`"table"`, `"schema.table"`), or an asset's key and
#: definition metadata, whose table the IO manager's default schema decides (`Located.spec_for`).
HeldTable = str | tuple[dg.AssetKey, Mapping[str, Any]]


def published_datasource(published: dg.AssetsDefinition, caller: str) -> tuple[str, str]:
    """The data source and project that `published`, a `tableau_datasource_asset`, records in
    its metadata; a `ConfigurationError` naming `caller` for any other asset."""
    metadata = published.metadata_by_key.get(published.key, {})
    datasource, project = metadata.get("datasource"), metadata.get("project")
    if not isinstance(datasource, str) or not isinstance(project, str):
        raise ConfigurationError(
            f"{caller}: asset {published.key.to_user_string()} has no datasource and project "
            "metadata; pass the asset tableau_datasource_asset() made."
        )
    return datasource, project


def _assets(ref: object) -> dict[dg.AssetKey, Mapping[str, Any]] | None:
    """The assets `ref` stands for, each key with its definition metadata; None for a
    string or a value of another type."""
    if isinstance(ref, dg.AssetsDefinition):
        return {k: ref.metadata_by_key.get(k, {}) for k in ref.keys}
    if isinstance(ref, dg.AssetSpec):
        return {ref.key: ref.metadata}
    if isinstance(ref, dg.AssetDep):
        return {ref.asset_key: {}}
    if isinstance(ref, dg.AssetKey):
        return {ref: {}}
    return None


def _refuse(field: str, datasource: str, value: object, strings: str) -> ConfigurationError:
    """`value` in `field` is of no type it takes; `strings`: what a string there names."""
    return ConfigurationError(
        f"{field}= of data source {datasource!r} holds {value!r} ({type(value).__name__}); "
        f"pass assets (@asset definitions or AssetSpecs), AssetKeys, or {strings}."
    )


def dep_metadata(deps: Sequence[AssetRef], datasource: str) -> dict[dg.AssetKey, Mapping[str, Any]]:
    """Each dependency's key and, for an asset's definition or spec, its definition
    metadata, checked (`TableSpec.parse`: a misspelt key is refused when the definitions
    load, not ignored until a publish refuses the tree)."""
    found: dict[dg.AssetKey, Mapping[str, Any]] = {}
    for dep in deps:
        assets = _assets(dep)
        if assets is None:
            if not isinstance(dep, str):
                raise _refuse("deps", datasource, dep, 'the names of assets ("flights")')
            assets = {dg.AssetKey(dep): {}}
        for key, metadata in assets.items():
            TableSpec.parse(key.path, metadata, DEFAULT_SCHEMA)
        found.update(assets)
    return found


def held_tables(
    tables: Sequence[AssetRef] | None,
    deps: Mapping[dg.AssetKey, Mapping[str, Any]] | None,
    datasource: str,
) -> list[HeldTable] | None:
    """`tables` as names and assets' (key, metadata); an asset must be among `deps`, whose
    metadata a bare key takes (None: an op, which has no deps). `ConfigurationError` for a
    value of another type."""
    if tables is None:
        return None
    if not isinstance(tables, list | tuple):
        raise ConfigurationError(
            f"tables= of data source {datasource!r} is {tables!r} ({type(tables).__name__}); "
            'give a list, e.g. tables=[sales, "products"].'
        )
    held: list[HeldTable] = []
    for table in tables:
        assets = _assets(table)
        if assets is None:
            if not isinstance(table, str):
                raise _refuse("tables", datasource, table, 'table names ("table", "schema.table")')
            held.append(table)
            continue
        for key, metadata in assets.items():
            if deps is not None:
                if key not in deps:
                    raise ConfigurationError(
                        f"tables= of data source {datasource!r} holds asset "
                        f"{key.to_user_string()!r}, which is not in its deps; add it to deps=."
                    )
                metadata = metadata or deps[key]
            else:  # an op's tables, in no deps: checked here
                TableSpec.parse(key.path, metadata, DEFAULT_SCHEMA)
            held.append((key, metadata))
    return held


def held_deps(
    deps: dict[dg.AssetKey, Mapping[str, Any]], tables: Sequence[HeldTable] | None
) -> dict[dg.AssetKey, Mapping[str, Any]]:
    """The dependencies whose table the data source holds: all of them without `tables`."""
    if tables is None:
        return deps
    keys = {t[0] for t in tables if not isinstance(t, str)}
    names = {t.rsplit(".", 1)[-1] for t in tables if isinstance(t, str)}
    return {k: m for k, m in deps.items() if k in keys or (m.get("table") or k.path[-1]) in names}


def table_names(tables: Sequence[HeldTable] | None, located: Located) -> list[str] | None:
    """The held tables' names in the file (`"schema.table"` for an asset)."""
    if tables is None:
        return None
    return [t if isinstance(t, str) else located.spec_for(t[0].path, t[1]).label for t in tables]


def declared_model(
    sources: Mapping[dg.AssetKey, Mapping[str, Any]], datasource: str, *, chosen: bool
) -> dict[str, Any]:
    """`data_model`: what the publish will do, from the tables' declared keys (assets of
    one-part keys in schema Extract, the IO manager's default), as the run decides it
    (`preview`): the tree, or the refusal; `chosen`: by tables=. The run reads the file's
    keys, and refuses naming a key declared here that the file lacks."""
    specs = [
        TableSpec.parse(key.path, metadata, DEFAULT_SCHEMA) for key, metadata in sources.items()
    ]
    if not specs:
        return {}
    shown = preview({spec.table: spec.keys for spec in specs}, datasource, chosen=chosen)
    if not chosen:
        shown += (
            "\n\nWithout tables=, the data source holds every table of the file: its deps' "
            "tables are shown."
        )
    return {"data_model": dg.MetadataValue.md(shown)}


def copy_check_metadata(
    sources: Mapping[dg.AssetKey, Mapping[str, Any]],
    held: Sequence[HeldTable] | None,
    datasource: str,
) -> dict[str, Any]:
    """What `tableau_copy_check` reads of the publish asset: `tables`, the held tables'
    names (given tables=; an asset's by its table's name, whatever its schema), and the
    tree's `fact` and its `partition_column` (the fact's `partition_expr`, if it has
    one), when the deps' declared keys make a tree."""
    found: dict[str, Any] = {}
    if held is not None:
        found["tables"] = [
            t
            if isinstance(t, str)
            else TableSpec.parse(t[0].path, t[1], DEFAULT_SCHEMA).table.name.unescaped
            for t in held
        ]
    parsed = (
        TableSpec.parse(key.path, metadata, DEFAULT_SCHEMA) for key, metadata in sources.items()
    )
    specs = {spec.table: spec for spec in parsed}
    try:
        tree = data_model(
            {t: s.keys for t, s in specs.items()}, datasource, chosen=held is not None
        )
    except (ConfigurationError, DataModelError):  # no tables, or no tree: the run refuses
        return found
    found["fact"] = specs[tree.fact].label
    expr = specs[tree.fact].partition_expr
    if expr is not None:
        found["partition_column"] = expr if isinstance(expr, str) else dict(expr)
    return found


def declared_keys(
    located: Located, tables: Mapping[dg.AssetKey, Mapping[str, Any]]
) -> list[PendingKey]:
    """The foreign keys the held tables' assets declare, in the file's names."""
    specs = [located.spec_for(key.path, metadata) for key, metadata in tables.items()]
    return [PendingKey(spec.table, fk) for spec in specs for fk in spec.keys.foreign_keys]


def _lineage(columns: Mapping[dg.AssetKey, tuple[str, Sequence[str]]]) -> dg.TableColumnLineage:
    """Column `table.column` of the data source comes from `column` of the table's asset."""
    return dg.TableColumnLineage(
        {
            f"{table}.{column}": [dg.TableColumnDep(asset_key=key, column_name=column)]
            for key, (table, names) in columns.items()
            for column in names
        }
    )


def declared_lineage(tables: Mapping[dg.AssetKey, Mapping[str, Any]]) -> dict[str, Any]:
    """Lineage from the tables whose `dagster/column_schema` is known at definition time."""
    known = {
        key: (
            metadata.get("table") or key.path[-1],
            [c.name for c in metadata["dagster/column_schema"].columns],
        )
        for key, metadata in tables.items()
        if isinstance(metadata.get("dagster/column_schema"), dg.TableSchema)
    }
    return {"dagster/column_lineage": _lineage(known)} if known else {}


def stored_lineage(
    located: Located, tables: Mapping[dg.AssetKey, Mapping[str, Any]]
) -> dg.TableColumnLineage:
    """Lineage from the columns each table has in the file now."""
    columns: dict[dg.AssetKey, tuple[str, Sequence[str]]] = {}
    home = located.database
    with home.reading() as database, home.hyper.connect(database, create=False) as connection:
        catalog = Catalog(connection)
        for key, metadata in tables.items():
            table = located.spec_for(key.path, metadata).table
            if catalog.exists(table):
                names = [c.name for c in catalog.columns(table)]
                columns[key] = (table.name.unescaped, names)
    return _lineage(columns)
