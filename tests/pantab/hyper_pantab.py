"""pantab's four calls that test_roundtrip.py makes, played by Dagster assets through
HyperIOManager: what pantab writes, an asset returns; what pantab reads, a downstream
asset annotated with the return type receives.

- `table` (a str, `Name` or `TableName`; pantab's schema is "public" unless named) is
  the asset's metadata `schema` and `table`; table_mode "a" is `write_mode="append"`,
  "w" the default full refresh.
- `process_params={"default_database_version": ...}` is `HyperResource`'s setting.
- `json_columns` and `geo_columns` have no counterpart: json is stored as TEXT and
  pantab's geography (Hyper's binary form) as BYTEA, and both load back as pantab's do
  (hyper-assets' `geography_columns` takes well-known text).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
from dagster import AssetIn, AssetsDefinition, asset, materialize
from tableauhyperapi import Name, TableName

from hyper_assets import HyperIOManager, HyperResource

#: Each `return_type` and the annotation that loads it.
ANNOTATIONS = {"pandas": pd.DataFrame, "pyarrow": pa.Table, "polars": pl.DataFrame}


def frame_to_hyper(df, database, *, table, table_mode="w", process_params=None, **_columns):
    frames_to_hyper({table: df}, database, table_mode, process_params)


def frames_to_hyper(dict_of_frames, database, table_mode="w", process_params=None, **_columns):
    writers = [
        _writer(f"t{i}", table, table_mode, lambda f=frame: f)
        for i, (table, frame) in enumerate(dict_of_frames.items())
    ]
    assert materialize(writers, resources=_resources(database, process_params)).success


def frame_from_hyper(database, *, table, return_type="pandas"):
    return _read(database, [table], return_type)[0]


def frames_from_hyper(database, return_type="pandas"):
    with HyperResource().connect(database, create=False) as connection:
        catalog = connection.catalog
        tables = [t for s in catalog.get_schema_names() for t in catalog.get_table_names(s)]
    frames = _read(database, tables, return_type)
    names = [(t.schema_name.name.unescaped, t.name.unescaped) for t in tables]
    return dict(zip(names, frames, strict=True))


def _schema_and_name(table: str | Name | TableName) -> tuple[str, str]:
    if isinstance(table, TableName):
        schema = table.schema_name.name.unescaped if table.schema_name else "public"
        return schema, table.name.unescaped
    return "public", table.unescaped if isinstance(table, Name) else table


def _writer(key: str, table, table_mode: str, make: Callable[[], object]) -> AssetsDefinition:
    schema, name = _schema_and_name(table)
    mode = {"write_mode": "append"} if table_mode == "a" else {}

    @asset(name=key, metadata={"schema": schema, "table": name, **mode})
    def written():
        return make()

    return written


def _read(database: Path, tables: list, return_type: str) -> list[object]:
    """Each table as `return_type`, as an asset annotated with it receives it."""
    seen: dict[str, object] = {}

    def reader(key: str) -> AssetsDefinition:
        def read(frame) -> None:
            seen[key] = frame

        read.__annotations__["frame"] = ANNOTATIONS[return_type]
        return asset(name=f"read_{key}", ins={"frame": AssetIn(key=key)})(read)

    keys = [f"t{i}" for i in range(len(tables))]
    upstream = [_writer(k, t, "w", lambda: None) for k, t in zip(keys, tables, strict=True)]
    readers = [reader(k) for k in keys]
    result = materialize([*upstream, *readers], resources=_resources(database), selection=readers)
    assert result.success
    return [seen[k] for k in keys]


def _resources(database: Path, process_params: Mapping[str, str] | None = None) -> dict:
    version = int((process_params or {}).get("default_database_version", 2))
    io = HyperIOManager(
        database=str(database),
        hyper=HyperResource(default_database_version=version),
        staging_dir=str(Path(database).parent / "staging"),
    )
    return {"io_manager": io}
