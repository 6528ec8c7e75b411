"""pantab's test fixtures: a frame of every type it supports, and the frame it expects back.

Copied from innobi/pantab tests/conftest.py at c8699098f704974f5c4cd3687d0077f9e9418439
(BSD 3-Clause License, Copyright (c) 2018-2024 William Ayd and innobi, LLC; pantab's
LICENSE.txt), for test_roundtrip.py beside it. Changed, each marked `hyper-assets:`:

- `frame` and `roundtripped` apply hyper-assets' two differences (docs/types.md):
  `interval` (month_day_nano_interval) is refused with an UnsupportedTypeError, so it is
  dropped from every frame; uint32 (`oid`) is stored as BIGINT where pantab stores OID,
  so it loads back as int64.
- Its tests are marked slow (`pytest_collection_modifyitems`), and the hyperds that
  hyper_pantab.py keeps for them stop at the session's end (`hyperds`).
- `Compat.drop_columns` drops the columns a frame has, without narwhals (not a
  dependency here), so that dropping `interval` again is no error; `cast_column_to_type`,
  which only pantab's writer tests use, is left out, as are the fixtures only its other
  modules use (`tab_api`, `datapath`).
"""

import datetime
import pathlib

import numpy as np
import pandas as pd
import pandas.testing as tm
import polars as pl
import pyarrow as pa
import pytest

try:
    import tableauhyperapi as tab_api
except ModuleNotFoundError:
    has_tableauhyperapi = False
else:
    del tab_api
    has_tableauhyperapi = True


def basic_arrow_table():
    schema = pa.schema(
        [
            ("int16", pa.int16()),
            ("int32", pa.int32()),
            ("int64", pa.int64()),
            ("Int16", pa.int16()),
            ("Int32", pa.int32()),
            ("Int64", pa.int64()),
            ("float32", pa.float32()),
            ("float64", pa.float64()),
            ("Float32", pa.float32()),
            ("Float64", pa.float64()),
            ("bool", pa.bool_()),
            ("boolean", pa.bool_()),
            ("date32", pa.date32()),
            ("datetime64", pa.timestamp("us")),
            ("datetime64_utc", pa.timestamp("us", "UTC")),
            ("object", pa.large_string()),
            ("string", pa.string()),
            ("int16_limits", pa.int16()),
            ("int32_limits", pa.int32()),
            ("int64_limits", pa.int64()),
            ("float32_limits", pa.float32()),
            ("float64_limits", pa.float64()),
            ("oid", pa.uint32()),
            ("non-ascii", pa.utf8()),
            ("json", pa.large_string()),
            ("binary", pa.binary()),
            ("interval", pa.month_day_nano_interval()),
            ("time64us", pa.time64("us")),
            ("geography", pa.large_binary()),
            ("decimal", pa.decimal128(38, 10)),
            ("string_view", pa.string_view()),
            ("binary_view", pa.binary_view()),
            ("categorical", pa.dictionary(pa.int8(), pa.utf8())),
        ]
    )
    tbl = pa.Table.from_arrays(
        [
            pa.array([1, 6, 0]),
            pa.array([2, 7, 0]),
            pa.array([3, 8, 0]),
            pa.array([1, None, None]),
            pa.array([2, None, None]),
            pa.array([3, None, None]),
            pa.array([4, 9.0, None]),
            pa.array([5, 10.0, None]),
            pa.array([1.0, 1.0, None]),
            pa.array([2.0, 2.0, None]),
            pa.array([True, False, False]),
            pa.array([True, False, None]),
            pa.array(
                [datetime.date(2024, 1, 1), datetime.date(2025, 1, 1), None],
            ),
            pa.array(
                [
                    datetime.datetime(2018, 1, 1, 0, 0, 0),
                    datetime.datetime(2019, 1, 1, 0, 0, 0),
                    None,
                ],
            ),
            pa.array(
                [
                    datetime.datetime(2018, 1, 1, 0, 0, 0),
                    datetime.datetime(2019, 1, 1, 0, 0, 0),
                    None,
                ],
            ),
            pa.array(["foo", "bar", None]),
            pa.array(["foo", "bar", None]),
            pa.array([-(2**15), 2**15 - 1, 0]),
            pa.array([-(2**31), 2**31 - 1, 0]),
            pa.array([-(2**63), 2**63 - 1, 0]),
            pa.array([-(2**24), 2**24 - 1, None]),
            pa.array([-(2**53), 2**53 - 1, None]),
            pa.array([1, 42, None]),
            pa.array(
                ["\xef\xff\xdc\xde\xee", "\xfa\xfb\xdd\xaf\xaa", None],
            ),
            pa.array(['{"foo": 42}', '{"bar": -42}', None]),
            pa.array([b"\xde\xad\xbe\xef", b"\xff\xee", None]),
            pa.array(
                [
                    pa.scalar((1, 15, -30000), type=pa.month_day_nano_interval()),
                    pa.scalar((-1, -15, 30000), type=pa.month_day_nano_interval()),
                    None,
                ]
            ),
            pa.array([234, 42, None]),
            pa.array(
                [
                    b"\x07\xaa\x02\xe0%n\xd9\x01\x01\n\x00\xce\xab\xe8\xfa=\xff\x96\xf0\x8a\x9f\x01",
                    b"\x07\xaa\x02\x0c&n\x82\x01\x01\n\x00\xb0\xe2\xd4\xcc>\xd4\xbc\x97\x88\x0f",
                    None,
                ]
            ),
            pa.array(["1234567890.123456789", "99876543210.987654321", None]),
            pa.array(["foo", "longer_than_prefix_size", None], type=pa.string_view()),
            pa.array([b"foo", b"longer_than_prefix_size", None], type=pa.binary_view()),
            pa.array(["foo", "foo", None]),
        ],
        schema=schema,
    )

    return tbl


def basic_dataframe():
    df = pd.DataFrame(
        [
            [
                1,
                2,
                3,
                1,
                2,
                3,
                4.0,
                5.0,
                1.0,
                2.0,
                True,
                True,
                pd.to_datetime("2024-01-01"),
                pd.to_datetime("2018-01-01"),
                pd.to_datetime("2018-01-01", utc=True),
                "foo",
                "foo",
                np.iinfo(np.int16).min,
                np.iinfo(np.int32).min,
                np.iinfo(np.int64).min,
                -(2**24),
                -(2**53),
                1,
                "\xef\xff\xdc\xde\xee",
                '{"foo": 42}',
            ],
            [
                6,
                7,
                8,
                np.nan,
                np.nan,
                np.nan,
                9.0,
                10.0,
                1.0,
                2.0,
                False,
                False,
                pd.to_datetime("2025-01-01"),
                pd.to_datetime("2019-01-01"),
                pd.to_datetime("2019-01-01", utc=True),
                "bar",
                "bar",
                np.iinfo(np.int16).max,
                np.iinfo(np.int32).max,
                np.iinfo(np.int64).max,
                2**24 - 1,
                2**53 - 1,
                42,
                "\xfa\xfb\xdd\xaf\xaa",
                '{"bar": -42}',
            ],
            [
                0,
                0,
                0,
                np.nan,
                np.nan,
                np.nan,
                np.nan,
                np.nan,
                pd.NA,
                pd.NA,
                False,
                pd.NA,
                pd.NaT,
                pd.NaT,
                pd.NaT,
                np.nan,
                pd.NA,
                0,
                0,
                0,
                np.nan,
                np.nan,
                pd.NA,
                np.nan,
                pd.NA,
            ],
        ],
        columns=[
            "int16",
            "int32",
            "int64",
            "Int16",
            "Int32",
            "Int64",
            "float32",
            "float64",
            "Float32",
            "Float64",
            "bool",
            "boolean",
            "date32",
            "datetime64",
            "datetime64_utc",
            "object",
            "string",
            "int16_limits",
            "int32_limits",
            "int64_limits",
            "float32_limits",
            "float64_limits",
            "oid",
            "non-ascii",
            "json",
        ],
    )

    df = df.astype(
        {
            "int16": np.int16,
            "Int16": "Int16",
            "int32": np.int32,
            "Int32": "Int32",
            "int64": np.int64,
            "Int64": "Int64",
            "float32": np.float32,
            "float64": np.float64,
            "Float32": "Float32",
            "Float64": "Float64",
            "bool": bool,
            "boolean": "boolean",
            "date32": "date32[pyarrow]",
            "datetime64": "datetime64[ns]",
            "datetime64_utc": "datetime64[ns, UTC]",
            "object": "object",
            "string": "string",
            "int16_limits": np.int16,
            "int32_limits": np.int32,
            "int64_limits": np.int64,
            "float32_limits": np.float32,
            "float64_limits": np.float64,
            "oid": "UInt32",
            "non-ascii": "string",
            "json": "string",
        }
    )

    # See pandas GH issue #56994
    df["binary"] = pa.array([b"\xde\xad\xbe\xef", b"\xff\xee", None], type=pa.binary())
    df["binary"] = df["binary"].astype("binary[pyarrow]")
    # pandas interval support is broken in pyarrow < 16
    # df["interval"] = pa.array(
    #    [
    #        pa.scalar((1, 15, -30000), type=pa.month_day_nano_interval()),
    #        pa.scalar((-1, -15, 30000), type=pa.month_day_nano_interval()),
    #        None,
    #    ]
    # )
    # df["interval"] = df["interval"].astype("month_day_nano_interval[pyarrow]")
    df["time64us"] = pd.DataFrame({"col": pa.array([234, 42, None], type=pa.time64("us"))})
    df["time64us"] = df["time64us"].astype("time64[us][pyarrow]")
    df["geography"] = pa.array(
        [
            b"\x07\xaa\x02\xe0%n\xd9\x01\x01\n\x00\xce\xab\xe8\xfa=\xff\x96\xf0\x8a\x9f\x01",
            b"\x07\xaa\x02\x0c&n\x82\x01\x01\n\x00\xb0\xe2\xd4\xcc>\xd4\xbc\x97\x88\x0f",
            None,
        ]
    )
    df["geography"] = df["geography"].astype("large_binary[pyarrow]")

    df["decimal"] = pd.Series(
        ["1234567890.123456789", "99876543210.987654321", None],
        dtype=pd.ArrowDtype(pa.decimal128(38, 10)),
    )
    """
    https://github.com/pandas-dev/pandas/issues/59883
    df["string_view"] = pd.Series(
        ["foo", "longer_than_prefix_size", None],
        dtype=pd.ArrowDtype(pa.string_view())),
    df["binary_view"] = pd.Series(
        [b"foo", b"longer_than_prefix_size", None],
        dtype=pd.ArrowDtype(pa.binary_view())),
    """
    df["categorical"] = pd.Series(["foo", "foo", pd.NA]).astype(pd.CategoricalDtype())

    return df


def basic_polars_frame():
    tbl = basic_arrow_table()

    # polars does not support month_day_nano_interval yet
    tbl = tbl.drop_columns(["interval"])
    df = pl.from_arrow(tbl)
    return df


@pytest.fixture(scope="session", autouse=True)
def hyperds():
    """hyper-assets: hyper_pantab.py's hyperds serve every test, and stop at the end."""
    import hyper_pantab

    yield
    hyper_pantab.close()


def pytest_collection_modifyitems(items):
    """hyper-assets: these tests are slow (3 to 4 minutes in all on a busy machine)."""
    for item in items:
        if item.path.parent == pathlib.Path(__file__).parent:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(params=[basic_arrow_table, basic_dataframe, basic_polars_frame])
def frame(request):
    """Fixture to use which should contain all data types."""
    return without_interval(request.param())  # hyper-assets: difference 1


def roundtripped_pyarrow():
    schema = pa.schema(
        [
            ("int16", pa.int16()),
            ("int32", pa.int32()),
            ("int64", pa.int64()),
            ("Int16", pa.int16()),
            ("Int32", pa.int32()),
            ("Int64", pa.int64()),
            ("float32", pa.float32()),
            ("float64", pa.float64()),
            ("Float32", pa.float32()),
            ("Float64", pa.float64()),
            ("bool", pa.bool_()),
            ("boolean", pa.bool_()),
            ("date32", pa.date32()),
            ("datetime64", pa.timestamp("us")),
            ("datetime64_utc", pa.timestamp("us", "UTC")),
            ("object", pa.large_string()),
            ("string", pa.large_string()),
            ("int16_limits", pa.int16()),
            ("int32_limits", pa.int32()),
            ("int64_limits", pa.int64()),
            ("float32_limits", pa.float32()),
            ("float64_limits", pa.float64()),
            ("oid", pa.uint32()),
            ("non-ascii", pa.large_string()),
            ("json", pa.large_string()),
            ("binary", pa.large_binary()),
            ("interval", pa.month_day_nano_interval()),
            ("time64us", pa.time64("us")),
            ("geography", pa.large_binary()),
            ("decimal", pa.decimal128(38, 10)),
            # ("string_view", pa.large_string()),
            # ("binary_view", pa.large_binary()),
        ]
    )
    tbl = basic_arrow_table()

    # pyarrow does not support casting from string_view to large_string,
    # so we have to handle manually
    tbl = tbl.drop_columns(["string_view", "binary_view", "categorical"])
    tbl = tbl.cast(schema)

    sv = (pa.array(["foo", "longer_than_prefix_size", None], type=pa.large_string()),)
    bv = pa.array([b"foo", b"longer_than_prefix_size", None], type=pa.large_binary())
    cat = pa.array(["foo", "foo", None], type=pa.large_string())
    tbl = tbl.append_column("string_view", sv)
    tbl = tbl.append_column("binary_view", bv)
    tbl = tbl.append_column("categorical", cat)

    return tbl


def roundtripped_pandas():
    """Roundtripped DataFrames should use arrow dtypes by default.

    Derived from the roundtripped pyarrow table rather than basic_dataframe()
    to work around https://github.com/pandas-dev/pandas/issues/64578.
    """
    tbl = roundtripped_pyarrow()
    tbl = tbl.drop_columns(["interval", "string_view", "binary_view"])
    return tbl.to_pandas(types_mapper=pd.ArrowDtype)


def roundtripped_polars():
    df = basic_polars_frame()
    return df


@pytest.fixture(
    params=[
        ("pandas", roundtripped_pandas),
        ("pyarrow", roundtripped_pyarrow),
        ("polars", roundtripped_polars),
    ]
)
def roundtripped(request):
    result_obj = request.param[1]()
    result_obj = oid_as_int64(without_interval(result_obj))  # hyper-assets: differences 1, 2
    return (request.param[0], result_obj)


# hyper-assets: its two differences from pantab.
def without_interval(frame):
    """The frame without its `interval` column, which hyper-assets refuses."""
    return Compat.drop_columns(frame, ["interval"])


def oid_as_int64(frame):
    """The expected frame with `oid` (uint32) as int64: hyper-assets stores it as BIGINT."""
    if isinstance(frame, pd.DataFrame):
        return frame.astype({"oid": pd.ArrowDtype(pa.int64())})
    if isinstance(frame, pa.Table):
        return frame.set_column(
            frame.schema.get_field_index("oid"), "oid", frame["oid"].cast(pa.int64())
        )
    return frame.with_columns(pl.col("oid").cast(pl.Int64))


@pytest.fixture
def tmp_hyper(tmp_path) -> pathlib.Path:
    """A temporary file name to write / read a Hyper extract from."""
    return tmp_path / "test.hyper"


@pytest.fixture(params=["w", "a"])
def table_mode(request):
    """Write or append markers for table handling."""
    return request.param


@pytest.fixture(
    params=[
        (False, None, tuple(("table",))),
        (True, "Name", tuple(("table",))),
        (True, "TableName", tuple(("table",))),
        (True, "TableName", ("public", "table")),
        (True, "TableName", ("nonpublic", "table")),
    ]
)
def table_name(request):
    """Various ways to represent a table in Tableau."""
    needs_hyperapi, hyperapi_obj, args = request.param
    if not needs_hyperapi:
        return args[0]

    tab_api = pytest.importorskip("tableauhyperapi")
    obj = getattr(tab_api, hyperapi_obj)(*args)
    return obj


class Compat:
    @staticmethod
    def assert_frame_equal(result, expected):
        assert isinstance(result, type(expected))
        if isinstance(result, pd.DataFrame):
            tm.assert_frame_equal(result, expected)
            return
        elif isinstance(result, pa.Table):
            assert result.equals(expected, check_metadata=True)
            return
        elif isinstance(result, pl.DataFrame):
            assert result.equals(expected)
        else:
            raise NotImplementedError("assert_frame_equal not implemented for type")

    @staticmethod
    def concat_frames(frame1, frame2):
        assert isinstance(frame1, type(frame2))
        if isinstance(frame1, pd.DataFrame):
            return pd.concat([frame1, frame2]).reset_index(drop=True)
        elif isinstance(frame1, pa.Table):
            return pa.concat_tables([frame1, frame2])
        elif isinstance(frame1, pl.DataFrame):
            return pl.concat([frame1, frame2])
        else:
            raise NotImplementedError("concat_frames not implemented for type")

    @staticmethod
    def empty_like(frame):
        if isinstance(frame, pd.DataFrame):
            return frame.iloc[:0]
        elif isinstance(frame, pa.Table):
            return frame.schema.empty_table()
        elif isinstance(frame, pl.DataFrame):
            return frame.filter(False)
        else:
            raise NotImplementedError("empty_like not implemented for type")

    @staticmethod
    def drop_columns(frame, columns):  # hyper-assets: without narwhals, and lenient
        if isinstance(frame, pa.Table):
            return frame.drop_columns([c for c in columns if c in frame.column_names])
        present = [c for c in columns if c in frame.columns]
        return (
            frame.drop(columns=present) if isinstance(frame, pd.DataFrame) else frame.drop(present)
        )

    @staticmethod
    def select_columns(frame, columns):
        if isinstance(frame, pd.DataFrame):
            return frame[columns]
        elif isinstance(frame, pa.Table):
            return frame.select(columns)
        elif isinstance(frame, pl.DataFrame):
            return frame.select(columns)
        else:
            raise NotImplementedError("select_columns not implemented for type")

    @staticmethod
    def add_non_writeable_column(frame):
        if isinstance(frame, pd.DataFrame):
            frame["should_fail"] = pd.Series([list((1, 2))])
            return frame
        elif isinstance(frame, pa.Table):
            new_column = pa.array([[1, 2], None, None])
            frame = frame.append_column("should_fail", new_column)
            return frame
        elif isinstance(frame, pl.DataFrame):
            frame = frame.with_columns(
                pl.Series(
                    name="should_fail",
                    values=[list((1, 2)), list((1, 2)), list((1, 2))],
                )
            )
            return frame
        else:
            raise NotImplementedError("test not implemented for object")


@pytest.fixture()
def compat():
    return Compat
