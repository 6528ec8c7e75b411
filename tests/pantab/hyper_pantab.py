"""pantab's four calls that test_roundtrip.py makes, played through HyperIOManager on
contexts built by Dagster's own unit-test helpers (tests/test_unit_contexts.py): what
pantab writes goes to `handle_output` of a `build_output_context`, as an asset's output;
what pantab reads comes from `load_input` of a `build_input_context` whose Dagster type
is the return type, as an input annotated with it. No run: each write and each read is
the IO manager's own call, on a real hyperd and a real file (a Dagster run per call took
the port twice as long).

- `table` (a str, `Name` or `TableName`; pantab's schema is "public" unless named) is
  the output's metadata `schema` and `table`; table_mode "a" is `write_mode="append"`,
  "w" the default full refresh.
- `process_params={"default_database_version": ...}` is `HyperResource`'s setting (2
  unless given, reads too). One `HyperResource` per setting serves the whole process
  (so one hyperd each), and one `HyperIOManager` per database and setting.
- `json_columns` and `geo_columns` have no counterpart: json is stored as TEXT and
  pantab's geography (Hyper's binary form) as BYTEA, and both load back as pantab's do
  (hyper-assets' `geography_columns` takes well-known text).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from functools import cache
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import polars as pl
import pyarrow as pa
from tableauhyperapi import Name, TableName

from hyper_assets import HyperIOManager, HyperResource

#: Each `return_type` and the type an input is annotated with to load it.
ANNOTATIONS = {"pandas": pd.DataFrame, "pyarrow": pa.Table, "polars": pl.DataFrame}


def frame_to_hyper(df, database, *, table, table_mode="w", process_params=None, **_columns):
    frames_to_hyper({table: df}, database, table_mode, process_params)


def frames_to_hyper(dict_of_frames, database, table_mode="w", process_params=None, **_columns):
    manager = _manager(str(database), _version(process_params))
    for i, (table, frame) in enumerate(dict_of_frames.items()):
        manager.handle_output(_output(f"t{i}", table, table_mode), frame)


def frame_from_hyper(database, *, table, return_type="pandas"):
    return _read(database, [table], return_type)[0]


def frames_from_hyper(database, return_type="pandas"):
    with _hyper(_version(None)).connect(database, create=False) as connection:
        catalog = connection.catalog
        tables = [t for s in catalog.get_schema_names() for t in catalog.get_table_names(s)]
    frames = _read(database, tables, return_type)
    names = [(t.schema_name.name.unescaped, t.name.unescaped) for t in tables]
    return dict(zip(names, frames, strict=True))


def close() -> None:
    """Lets go of the process's hyperds and Dagster resources (tests/pantab/conftest.py,
    at the session's end)."""
    for hyper in _HYPERS.values():
        hyper.close()
    _SCOPE.close()


def _schema_and_name(table: str | Name | TableName) -> tuple[str, str]:
    if isinstance(table, TableName):
        schema = table.schema_name.name.unescaped if table.schema_name else "public"
        return schema, table.name.unescaped
    return "public", table.unescaped if isinstance(table, Name) else table


def _output(key: str, table, table_mode: str) -> dg.OutputContext:
    """The output context of asset `key`, stored as `table`."""
    schema, name = _schema_and_name(table)
    mode = {"write_mode": "append"} if table_mode == "a" else {}
    return dg.build_output_context(
        asset_key=key,
        definition_metadata={"schema": schema, "table": name, **mode},
        resources=_no_resources(),
    )


def _read(database: Path, tables: list, return_type: str) -> list[object]:
    """Each table as `return_type`, as an input annotated with it receives it."""
    manager = _manager(str(database), _version(None))
    typed = dg.DagsterType(
        type_check_fn=lambda _, __: True,
        name=return_type,
        typing_type=ANNOTATIONS[return_type],
    )
    frames = []
    for i, table in enumerate(tables):
        key = f"t{i}"
        context = dg.build_input_context(
            asset_key=dg.AssetKey(key),
            upstream_output=_output(key, table, "w"),
            dagster_type=typed,
        )
        frames.append(manager.load_input(context))
    manager.staging.release()  # the loaded files, as a run's teardown removes them
    return frames


def _version(process_params: Mapping[str, str] | None) -> int:
    return int((process_params or {}).get("default_database_version", 2))


#: What `_no_resources` opened, for the process.
_SCOPE = ExitStack()


@cache
def _no_resources() -> Any:
    """No resources, built once: a context built without them builds them itself, with a
    Dagster instance of its own (half a second each on a busy machine). An input context
    takes no built resources (`build_input_context` wants a mapping): it builds its own."""
    return _SCOPE.enter_context(dg.build_resources({}))


#: Each `default_database_version`'s resource, for the whole process.
_HYPERS: dict[int, HyperResource] = {}


def _hyper(version: int) -> HyperResource:
    if version not in _HYPERS:
        _HYPERS[version] = HyperResource(default_database_version=version)
    return _HYPERS[version]


@cache
def _manager(database: str, version: int) -> HyperIOManager:
    return HyperIOManager(
        database=database,
        hyper=_hyper(version),
        staging_dir=str(Path(database).parent / "staging"),
    )
