"""Internal: column types, from Spark and Arrow schemas to Hyper columns, and back.

Spark's types are told by their class names, so this module imports no pyspark and takes
the types of whichever pyspark module is installed (pyspark 3.5 to the newest,
pyspark-client, databricks-connect's): a type a version lacks (TimeType is new in 4.1)
is simply never met there.

Data travels as Parquet in both directions. `Column.load_sql` says how a staged Parquet
column becomes the Hyper value, `export_sql` how a Hyper column is written to Parquet
for loading, and `spark_type` remembers a Spark type that Hyper cannot express exactly
(it is kept as a column comment, so loading restores it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
from tableauhyperapi import (
    Nullability,
    SqlType,
    TableDefinition,
    TypeTag,
    escape_name,
)

from hyper_assets.errors import DatabaseVersionError, UnsupportedTypeError

if TYPE_CHECKING:
    from pyspark.sql import types as T

#: Comment prefix that records the Spark type of a column whose Hyper type is wider.
SPARK_TYPE_COMMENT = "hyper-assets:spark-type="

_TIMESTAMP_NOTE = "stored as the wall-clock time in spark.sql.session.timeZone"

#: The newest file format version this Hyper writes.
NEWEST_VERSION = 4

#: The oldest Tableau releases that open each file format version (Hyper API docs,
#: "default_database_version"; docs/types.md says what is confirmed).
READ_BY = {
    0: "every Tableau release",
    1: "Tableau 2019.2.10 / 2019.3.6 / 2019.4.5 / 2020.1.1+, Prep 2020.2+",
    2: "Tableau Desktop/Server 2020.4.15 / 2021.1.12 / 2021.2.9 / 2021.3.8 / 2021.4.4 / "
    "2022.1.2+, Prep 2022.3+",
    3: "Tableau Desktop 2022.4.1+, Server 2023.1+, Prep 2022.4.1+",
    4: "Tableau 2024.3+",
}


_SQL_NAMES = {
    TypeTag.BOOL: "BOOLEAN",
    TypeTag.BIG_INT: "BIGINT",
    TypeTag.SMALL_INT: "SMALLINT",
    TypeTag.INT: "INTEGER",
    TypeTag.FLOAT: "REAL",
    TypeTag.DOUBLE: "DOUBLE PRECISION",
    TypeTag.BYTES: "BYTEA",
    TypeTag.TEXT: "TEXT",
    TypeTag.DATE: "DATE",
    TypeTag.INTERVAL: "INTERVAL",
    TypeTag.TIME: "TIME",
    TypeTag.TIMESTAMP: "TIMESTAMP",
    TypeTag.TIMESTAMP_TZ: "TIMESTAMPTZ",
    TypeTag.JSON: "JSON",
    TypeTag.TABGEOGRAPHY: "GEOGRAPHY",
    TypeTag.OID: "OID",
}


def sql_name(sql_type: SqlType) -> str:
    """The SQL spelling of a type (`str(SqlType)` gives enum names such as BIG_INT)."""
    if sql_type.tag == TypeTag.NUMERIC:
        return f"NUMERIC({sql_type.precision}, {sql_type.scale})"
    if sql_type.tag in (TypeTag.VARCHAR, TypeTag.CHAR):
        return f"{sql_type.tag.name}({sql_type.max_length})"
    return _SQL_NAMES[sql_type.tag]


#: How a column's values are staged: as they are, or intervals as micros / months.
StagedAs = Literal["same", "micros", "months"]


@dataclass(frozen=True)
class Column:
    """One column of a Hyper table as this library writes it."""

    name: str
    sql_type: SqlType
    nullable: bool = True
    spark_type: str | None = None
    staged_as: StagedAs = "same"

    @property
    def load_sql(self) -> str:
        """SQL that turns the staged Parquet column into this column's Hyper value."""
        ref = escape_name(self.name)
        if self.staged_as == "micros":
            return f"CAST({ref} AS BIGINT) * INTERVAL '1 microsecond'"
        if self.staged_as == "months":
            return f"CAST({ref} AS BIGINT) * INTERVAL '1 month'"
        return f"CAST({ref} AS {self.sql})"

    @property
    def sql(self) -> str:
        return sql_name(self.sql_type)


def _unsupported(table: str, name: str, type_name: str, fix: str) -> UnsupportedTypeError:
    return UnsupportedTypeError(
        f"Column {name!r} of {table} has type {type_name}, which a .hyper table cannot store. {fix}"
    )


def _decimal(
    table: str, name: str, precision: int, scale: int, cap: int, type_name: str
) -> SqlType:
    if precision > 18 and cap < 3:
        raise DatabaseVersionError(
            f"Column {name!r} of {table} has type {type_name}, which needs file format "
            f"version 3 (read by {READ_BY[3]}), above HyperResource(max_database_version="
            f"{cap}). Cast the column to decimal(18,{min(scale, 18)}) or double, or raise "
            "max_database_version to 3 if every Tableau that reads the file is that new.",
            column=name,
            needed=3,
            cap=cap,
        )
    return SqlType.numeric(precision, scale)


def _float(version: int) -> SqlType:
    return SqlType.float() if version >= 4 else SqlType.double()


def columns_from_spark(
    schema: T.StructType, table: str, version: int, cap: int = NEWEST_VERSION
) -> list[Column]:
    """Hyper columns for a Spark schema; raises `UnsupportedTypeError` naming the column.

    `version` is the file format version preferred (4 stores floats as REAL), `cap` the
    newest a column may need (`DatabaseVersionError` above it).
    """
    return [_spark_column(f, table, version, cap) for f in schema.fields]


#: Spark types stored as one Hyper type, by class name: (the type, whether the Spark type is
#: kept in the column's comment so a load restores it, how the value is staged).
_SPARK_PLAIN: dict[str, tuple[SqlType, bool, StagedAs]] = {
    "BooleanType": (SqlType.bool(), False, "same"),
    "ByteType": (SqlType.small_int(), True, "same"),
    "ShortType": (SqlType.small_int(), False, "same"),
    "IntegerType": (SqlType.int(), False, "same"),
    "LongType": (SqlType.big_int(), False, "same"),
    "DoubleType": (SqlType.double(), False, "same"),
    "StringType": (SqlType.text(), False, "same"),
    "BinaryType": (SqlType.bytes(), False, "same"),
    "DateType": (SqlType.date(), False, "same"),
    "TimestampNTZType": (SqlType.timestamp(), False, "same"),
    "TimestampType": (SqlType.timestamp(), True, "same"),  # the session time zone's clock
    "TimeType": (SqlType.time(), True, "same"),
    "DayTimeIntervalType": (SqlType.interval(), True, "micros"),
    "YearMonthIntervalType": (SqlType.interval(), True, "months"),
}

#: How to store the Spark types Hyper has no column for, by class name.
_SPARK_FIXES = {
    "ArrayType": "Explode it into rows, or turn it into a string with to_json() or array_join().",
    "MapType": "Explode it into key/value rows, or turn it into a string with to_json().",
    "StructType": "Select its fields as separate columns (col('s.field')), or turn it "
    "into a string with to_json().",
}


def _spark_column(field: T.StructField, table: str, version: int, cap: int) -> Column:
    t, name, nullable = field.dataType, field.name, field.nullable
    simple, kind = t.simpleString(), type(t).__name__
    if kind in _SPARK_PLAIN:
        sql_type, keep, staged_as = _SPARK_PLAIN[kind]
        return Column(name, sql_type, nullable, simple if keep else None, staged_as)
    if kind == "FloatType":
        return Column(name, _float(version), nullable, simple if version < 4 else None)
    if kind == "DecimalType":
        precision, scale = t.precision, t.scale  # type: ignore[attr-defined]
        return Column(name, _decimal(table, name, precision, scale, cap, simple), nullable)
    if kind == "CharType":
        return Column(name, SqlType.char(t.length), nullable)  # type: ignore[attr-defined]
    if kind == "VarcharType":
        return Column(name, SqlType.varchar(t.length), nullable)  # type: ignore[attr-defined]
    if kind == "NullType":
        return Column(name, SqlType.text(), True, simple)
    raise _unsupported(
        table,
        name,
        simple,
        _SPARK_FIXES.get(kind, "Cast it to a supported type (string, for example)."),
    )


def columns_from_arrow(
    schema: pa.Schema, table: str, version: int, cap: int = NEWEST_VERSION
) -> list[Column]:
    """Hyper columns for an Arrow schema, as `columns_from_spark` makes them."""
    return [_arrow_column(f, table, version, cap) for f in schema]


_ARROW_PLAIN: dict[pa.DataType, SqlType] = {
    pa.bool_(): SqlType.bool(),
    pa.int8(): SqlType.small_int(),
    pa.int16(): SqlType.small_int(),
    pa.uint8(): SqlType.small_int(),
    pa.int32(): SqlType.int(),
    pa.uint16(): SqlType.int(),
    pa.int64(): SqlType.big_int(),
    pa.uint32(): SqlType.big_int(),
    pa.float64(): SqlType.double(),
    pa.string(): SqlType.text(),
    pa.large_string(): SqlType.text(),
    pa.string_view(): SqlType.text(),
    pa.binary(): SqlType.bytes(),
    pa.large_binary(): SqlType.bytes(),
    pa.binary_view(): SqlType.bytes(),
    pa.date32(): SqlType.date(),
    pa.date64(): SqlType.date(),
    pa.time32("s"): SqlType.time(),
    pa.time32("ms"): SqlType.time(),
    pa.time64("us"): SqlType.time(),
    pa.time64("ns"): SqlType.time(),  # staged as microseconds: finer values are refused
}


def _arrow_column(field: pa.Field, table: str, version: int, cap: int) -> Column:
    t = field.type
    if pa.types.is_dictionary(t):  # any index type: staging writes its values
        t = t.value_type
    if t in _ARROW_PLAIN:
        return Column(field.name, _ARROW_PLAIN[t], field.nullable)
    if t == pa.float32():
        return Column(field.name, _float(version), field.nullable)
    if pa.types.is_timestamp(t):
        sql_type = SqlType.timestamp_tz() if t.tz else SqlType.timestamp()
        return Column(field.name, sql_type, field.nullable)
    if pa.types.is_null(t):
        raise _unsupported(
            table,
            field.name,
            "null (a column without a value type)",
            "Hyper cannot read it from Parquet. Give it the type its values will have, "
            "e.g. pa.nulls(n, pa.string()) or table.cast(schema).",
        )
    if pa.types.is_decimal(t) and t.precision <= 38:
        sql_type = _decimal(table, field.name, t.precision, t.scale, cap, str(t))
        return Column(field.name, sql_type, field.nullable)
    raise _unsupported(table, field.name, str(t), f"Cast it first, to {nearest_arrow_type(t)}.")


def nearest_arrow_type(t: pa.DataType) -> str:
    """The Arrow type nearest to `t` that a .hyper table stores, for `t` that it cannot."""
    if pa.types.is_float16(t):
        return "float32"
    if pa.types.is_uint64(t):
        return "int64 (values below 2**63) or decimal128(20, 0)"
    if pa.types.is_decimal(t):  # more than 38 digits
        return f"decimal128(38, {min(t.scale, 38)}) or float64"
    if pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_duration(t):
        return "int64 (its microseconds: .cast(pa.duration('us')).cast(pa.int64()))"
    if pa.types.is_interval(t):
        return "a string, or int64 columns of its months, days and nanoseconds"
    if pa.types.is_struct(t):
        return "separate columns (one per field), or a string of JSON"
    if pa.types.is_nested(t):  # lists, maps, unions
        return "rows (explode it), or a string of JSON"
    return "string"


def needed_version(columns: Sequence[Column]) -> int:
    """The oldest file format version that stores every column: 3 for NUMERIC wider than
    18 digits (128-bit), 4 for REAL, else 0."""
    needs = [0]
    for column in columns:
        if column.sql_type.tag == TypeTag.NUMERIC and (column.sql_type.precision or 0) > 18:
            needs.append(3)
        elif column.sql_type.tag == TypeTag.FLOAT:
            needs.append(4)
    return max(needs)


def columns_from_table(
    definition: TableDefinition, spark_types: dict[str, str] | None = None
) -> list[Column]:
    """The columns of a stored table, with the Spark types recorded in their comments."""
    spark_types = spark_types or {}
    return [
        Column(
            c.name.unescaped,
            c.type,
            c.nullability == Nullability.NULLABLE,
            spark_types.get(c.name.unescaped),
        )
        for c in definition.columns
    ]


def export_sql(column: Column, spark: bool) -> str:
    """SQL that writes a Hyper column to Parquet in a form its reader (Spark, else Arrow)
    takes back. Spark reads TIME as text (its recorded type restores it), Arrow as time."""
    ref = escape_name(column.name)
    tag = column.sql_type.tag
    if tag == TypeTag.INTERVAL:
        if column.spark_type and column.spark_type.startswith("interval year"):
            return (
                f"CAST(EXTRACT(YEAR FROM {ref}) * 12 + EXTRACT(MONTH FROM {ref}) AS INT) AS {ref}"
            )
        return f"CAST(EXTRACT(EPOCH FROM {ref}) * 1000000 AS BIGINT) AS {ref}"
    if tag in (TypeTag.JSON, TypeTag.TABGEOGRAPHY, TypeTag.OID) or (spark and tag == TypeTag.TIME):
        return f"CAST({ref} AS TEXT) AS {ref}"
    return ref


def describe(column: Column) -> str:
    """A short type description for Dagster's column schema."""
    text = column.sql.lower()
    if column.spark_type == "timestamp":
        return f"{text} ({_TIMESTAMP_NOTE})"
    return text
