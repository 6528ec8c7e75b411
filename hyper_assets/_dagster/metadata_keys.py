"""Every metadata key the library reads, once, with the shape of its value; and the check
that refuses a key close to one of them as the misspelling it almost surely is.

A misspelt key (`foreign_key` for `foreign_keys`) would otherwise be ignored: its key, its
check and its column role gone without a word. So wherever the library sees an asset's
metadata (`TableSpec.parse`: the IO manager's writes and loads, `build_hyper_checks`, the
publish assets, the component), a key that is not ours but close to one of ours is a
`MetadataKeyError` saying which one was meant. Any other key is the user's and passes.
docs/metadata.md lists the same keys for users.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from hyper_assets.errors import MetadataKeyError, MetadataValueError

#: An asset's (or an op output's) definition metadata, as the IO manager, the checks and
#: the publish read it: each key, and what its value is.
TABLE_KEYS: Mapping[str, str] = {
    "schema": "a non-empty string: the table's schema, any characters (left out: the asset "
    "key's next-to-last part, or the IO manager's default_schema)",
    "table": "a non-empty string: the table's name, any characters (left out: the asset "
    "key's last part)",
    "primary_key": 'a column name or a list of them, e.g. "id" or ["id", "site"]',
    "foreign_keys": '{"column": "schema.table.column"} (a reference may be a list, '
    '["schema", "table", "column"]), or a list of keys [{"columns": [...], "references": '
    '"schema.table", "ref_columns": [...]}]',
    "write_mode": "'append' or 'upsert' (left out: a full refresh, or a partition replace)",
    "partition_expr": "the column (or SQL expression) holding the partition, or for "
    'multi-partitions a dict {"dimension": "column"}',
    "schema_evolution": "'add_columns': appends, upserts and partition writes add the "
    "columns the table lacks, NULL in its stored rows (left out: new columns are refused)",
    "geography_columns": 'a column name or a list of them, e.g. ["location"]: string '
    "columns of well-known text, stored as GEOGRAPHY",
    "dagster/column_schema": "a dagster.TableSchema (Dagster's own key): its columns' "
    "descriptions are kept in the schema each write reports",
}

#: An input's metadata (`AssetIn(metadata=...)`, `In(metadata=...)`).
INPUT_KEYS: Mapping[str, str] = {
    "columns": 'a list of column names, e.g. ["carrier", "name"]: the columns the input loads',
    "dtype_backend": "'pyarrow' (the default, lossless) or 'numpy_nullable': how a "
    "pandas.DataFrame input holds its columns (docs/types.md)",
}

#: A publish asset's metadata, which `tableau_datasource_asset` writes itself and
#: `tableau_translator` and `quality_warning_sensor` read back; never the user's to give.
PUBLISH_KEYS: Mapping[str, str] = {
    "datasource": "the data source's name on the server",
    "project": "the project it is published to, as given",
}

#: How close (difflib's ratio, after folding case and `-` or spaces to `_`) a key must be
#: to one of ours to be taken for a misspelling of it: `foreign_key`, `primary_keys`,
#: `partition_exp`, `write-mode`, `partition_expression`, `tabel` are; `label`,
#: `table_name`, `schema_version`, `partition` are not.
CLOSENESS = 0.8


def misspelt(key: str, known: Mapping[str, str]) -> str | None:
    """The key of `known` that `key` is a misspelling of; None when it is ours or far from
    all of ours (then it is the user's own)."""
    if key in known:
        return None
    folded = key.strip().lower().replace("-", "_").replace(" ", "_")
    close = difflib.get_close_matches(folded, list(known), n=1, cutoff=CLOSENESS)
    return close[0] if close else None


def check_keys(metadata: Mapping[str, object] | None, known: Mapping[str, str], who: str) -> None:
    """`MetadataKeyError` for the first key of `metadata` that misspells one of `known`."""
    for key in metadata or {}:
        meant = misspelt(key, known)
        if meant is not None:
            raise MetadataKeyError(
                f"Metadata key {key!r} of {who} is not one hyper-assets reads: did you mean "
                f"{meant!r} ({known[meant]})? Rename it; as it is, it would be ignored.",
                key=key,
                meant=meant,
            )


def wrong_shape(key: str, value: object, who: str, known: Mapping[str, str]) -> MetadataValueError:
    """The error for a value of key `key` that is not of its shape."""
    return MetadataValueError(f"Metadata {key} of {who} is {value!r}; give {known[key]}.", key=key)
