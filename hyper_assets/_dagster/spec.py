"""Asset metadata, parsed once into frozen typed values: one named error per bad key
(the keys and their shapes: `hyper_assets._dagster.metadata_keys`).

The IO manager, the checks and the component read an asset's table, write mode, keys
and partition expression from a `TableSpec`, never from the metadata dict itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tableauhyperapi import TableName

from hyper_assets._dagster.metadata_keys import INPUT_KEYS, TABLE_KEYS, check_keys, wrong_shape
from hyper_assets._engine.tables import Keys, parse_foreign_keys, table_label
from hyper_assets._rows.frames import DTYPE_BACKENDS, DtypeBackend
from hyper_assets._rows.modes import DECLARED_MODES, WriteMode
from hyper_assets.errors import ConfigurationError

#: The schema of assets whose key has one part, unless the IO manager's `default_schema`
#: says otherwise.
DEFAULT_SCHEMA = "Extract"

PartitionExpr = str | Mapping[str, str]


@dataclass(frozen=True)
class TableSpec:
    """What an asset's definition metadata says about the table it is stored as."""

    table: TableName
    keys: Keys
    declared_mode: WriteMode | None = None
    partition_expr: PartitionExpr | None = None
    add_columns: bool = False  # metadata schema_evolution="add_columns"
    geography: tuple[str, ...] = ()  # metadata geography_columns: WKT stored as GEOGRAPHY

    @property
    def label(self) -> str:
        return table_label(self.table)

    def write_mode(self, partitioned: bool) -> WriteMode:
        """The declared mode, else a partition replace or a full refresh."""
        if self.declared_mode:
            return self.declared_mode
        return WriteMode.PARTITION if partitioned else WriteMode.REPLACE

    @classmethod
    def parse(
        cls,
        key_path: Sequence[str],
        metadata: Mapping[str, Any] | None,
        default_schema: str,
        who: str | None = None,
    ) -> TableSpec:
        """`[..., schema, table]` -> "schema"."table"; one part -> `default_schema`.

        Metadata `schema` and `table` override the key, for names Dagster keys cannot
        hold; each key read here is checked for its shape (as `TABLE_KEYS` states it),
        and a key misspelling one of them is refused (`hyper_assets._dagster.metadata_keys`).
        `who` names the asset (or op output) in errors; default: the asset of `key_path`.
        """
        metadata = metadata or {}
        who = who or f"asset {'/'.join(key_path)!r}"
        check_keys(metadata, TABLE_KEYS, who)
        schema = _name(metadata, "schema", who) or (
            key_path[-2] if len(key_path) > 1 else default_schema
        )
        table = TableName(schema, _name(metadata, "table", who) or key_path[-1])
        subject = f"{table_label(table)} ({who})"
        return cls(
            table,
            Keys(
                _column_names(metadata, "primary_key", subject),
                parse_foreign_keys(metadata.get("foreign_keys"), schema, subject),
            ),
            _declared_mode(metadata.get("write_mode"), subject),
            _partition_expr(metadata.get("partition_expr"), subject),
            _adds_columns(metadata.get("schema_evolution"), subject),
            _column_names(metadata, "geography_columns", subject),
        )


def _name(metadata: Mapping[str, Any], key: str, who: str) -> str | None:
    value = metadata.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise wrong_shape(key, value, who, TABLE_KEYS)
    return value


def _column_names(metadata: Mapping[str, Any], key: str, subject: str) -> tuple[str, ...]:
    """Metadata `key`: a column name, a list of them, or nothing."""
    value = metadata.get(key)
    if value is None or value == []:
        return ()
    columns = (value,) if isinstance(value, str) else value
    if not isinstance(columns, Sequence) or not all(isinstance(c, str) and c for c in columns):
        raise wrong_shape(key, value, subject, TABLE_KEYS)
    return tuple(columns)


def _declared_mode(value: object, subject: str) -> WriteMode | None:
    if value is None:
        return None
    if value not in DECLARED_MODES:
        raise wrong_shape("write_mode", value, subject, TABLE_KEYS)
    return WriteMode(str(value))


def _adds_columns(value: object, subject: str) -> bool:
    if value is None or value == "add_columns":
        return value is not None
    raise wrong_shape("schema_evolution", value, subject, TABLE_KEYS)


def _partition_expr(value: object, subject: str) -> PartitionExpr | None:
    if value is None or (isinstance(value, str) and value):
        return value
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()
    ):
        return dict(value)
    raise wrong_shape("partition_expr", value, subject, TABLE_KEYS)


def input_columns(metadata: Mapping[str, Any] | None, label: str) -> tuple[str, ...] | None:
    """The columns an input's metadata asks for (`AssetIn(metadata={"columns": [...]})`);
    a key misspelling `columns` is refused."""
    who = f"the input loading {label}"
    check_keys(metadata, INPUT_KEYS, who)
    wanted = (metadata or {}).get("columns")
    if not wanted:
        return None
    if isinstance(wanted, str) or not all(isinstance(w, str) for w in wanted):
        raise wrong_shape("columns", wanted, who, INPUT_KEYS)
    return tuple(wanted)


def dtype_backend(value: object, setting: str) -> DtypeBackend:
    """`value` of `setting` (named as the user writes it) as a pandas dtype_backend."""
    for backend in DTYPE_BACKENDS:
        if value == backend:
            return backend
    allowed = " or ".join(repr(b) for b in DTYPE_BACKENDS)
    raise ConfigurationError(
        f"{setting} is {value!r}; use {allowed} (pandas' dtype_backend: how a pandas input "
        "holds its columns, docs/types.md), or leave it out for 'pyarrow'."
    )


def input_dtype_backend(
    metadata: Mapping[str, Any] | None, default: DtypeBackend, subject: str, pandas: bool
) -> DtypeBackend:
    """The dtype_backend of `subject`, an input (pandas if `pandas`): its metadata's
    (`AssetIn(metadata={"dtype_backend": ...})`), else the IO manager's `default`."""
    if "dtype_backend" not in (metadata or {}):
        return default
    setting = f"Input metadata dtype_backend of {subject}"
    backend = dtype_backend((metadata or {})["dtype_backend"], setting)
    if not pandas:
        raise ConfigurationError(
            f"{setting} is {backend!r}, but the input is not annotated pandas.DataFrame, so "
            "it would be ignored: remove it, or annotate the input pandas.DataFrame."
        )
    return backend
