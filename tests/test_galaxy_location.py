"""The galaxy code location (`galaxy/`): TPC-H at scale factor 0.01 through Spark into one
`.hyper` file, each fact's data source published to the emulator and read back, each copy
holding exactly the rows of the table it copies; then one month of `lineitem` and then
`nation` change, and each change goes where its table is, and nowhere else."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dagster_pyspark import PySparkResource
from helpers import assert_copy, query

from galaxy import definitions
from hyper_assets import HyperIOManager, TableauServerResource, TokenSignIn
from hyper_assets._engine.process import SharedHyper
from hyper_assets._rows.outbox import Outbox
from hyper_assets.emulator import Emulator
from tpch import TpchParquet, generate

SCALE_FACTOR = 0.01
MONTHS = ("1995-05-01", "1995-07-01")  # the first and last month loaded
CHANGED = "1995-06-01"  # the month of lineitem that changes
TOKEN_NAME, TOKEN_SECRET, SITE = "ci", "s3cret", "tpch"

#: Each data source's copy: its tables, and the table of the file each holds the rows of.
NATIONS = {"l_orderkey.o_custkey.c_nationkey": "nation", "l_suppkey.s_nationkey": "nation"}
COPIES = {
    "Line items": {
        **{t: t for t in ("lineitem", "orders", "customer", "part", "supplier")},
        **{f"nation ({role})": "nation" for role in NATIONS},
        **{f"region ({role}.n_regionkey)": "region" for role in NATIONS},
    },
    "Supply": {t: t for t in ("partsupp", "part", "supplier", "nation", "region")},
    "Orders": {t: t for t in ("orders", "customer", "nation", "region")},
}


def rewrite(path: Path, column: str, where: pa.ChunkedArray, value: str) -> int:
    """Sets `column` of the Parquet file's rows `where` holds to `value`; how many."""
    table = pq.read_table(path)
    index = table.schema.get_field_index(column)
    # tpchgen-cli writes strings as Arrow's string_view, which if_else does not take.
    changed = pc.if_else(where, value, table[column].cast(pa.string()))
    pq.write_table(table.set_column(index, column, changed), path)
    return pc.sum(where).as_py()


class Location:
    """The galaxy's Definitions on a temp file and Parquet, publishing to `emulator`."""

    def __init__(self, tmp_path: Path, emulator: Emulator, hyper: SharedHyper) -> None:
        self.database, self.parquet = tmp_path / "tpch.hyper", tmp_path / "parquet"
        self.emulator, self.hyper = emulator, hyper
        self.instance = dg.DagsterInstance.ephemeral()
        self.defs = definitions.build_definitions(
            io_manager=HyperIOManager(
                database=str(self.database),
                staging_dir=str(tmp_path / "staging"),
            ),
            pyspark=PySparkResource(spark_config={}),  # the test session's local Spark
            tpch=TpchParquet(directory=str(self.parquet)),
            tableau=TableauServerResource(
                server_url=emulator.url,
                site=SITE,
                sign_in=TokenSignIn(name=TOKEN_NAME, secret=TOKEN_SECRET),
            ),
        )

    def run(self, job: str, **kwargs: Any) -> dg.ExecuteInProcessResult:
        result = self.defs.resolve_job_def(job).execute_in_process(instance=self.instance, **kwargs)
        assert result.success
        return result

    def publish(self) -> dict[str, tuple[str, list[tuple[str, str, int]]]]:
        """Each data source's publish kind and (table, action, rows) sent."""
        out = {}
        for event in self.run("publish_job").get_asset_materialization_events():
            metadata = {k: v.value for k, v in event.materialization.metadata.items()}
            sent = metadata["sent"].records
            rows = sorted((r.data["table"], r.data["action"], r.data["rows"]) for r in sent)
            out[metadata["datasource"]] = (metadata["publish"], rows)
        return out

    def assert_copies(self) -> None:
        for datasource, sources in COPIES.items():
            remote = self.emulator.site_dir(SITE) / f"{datasource}.hyper"
            assert_copy(self.hyper, self.database, remote, sources)


@pytest.fixture
def location(tmp_path: Path, spark: Any, hyper: SharedHyper) -> Iterator[Location]:
    server = tmp_path / "server"
    server.mkdir()
    tokens = {TOKEN_NAME: TOKEN_SECRET}
    with Emulator(server, tokens=tokens, hyper=hyper, sites=("", SITE)) as emulator:
        yield Location(tmp_path, emulator, hyper)


@pytest.mark.slow
def test_each_fact_publishes_its_tree_and_each_change_goes_where_its_table_is(
    location: Location,
) -> None:
    dg.Definitions.validate_loadable(definitions.defs)  # the location as `dagster dev` loads it
    generate(SCALE_FACTOR, location.parquet)
    location.run("refresh_job")
    backfill = {
        "dagster/asset_partition_range_start": MONTHS[0],
        "dagster/asset_partition_range_end": MONTHS[-1],
    }
    location.run("monthly_job", tags=backfill)
    # Every table and every role copy holds exactly its table's rows.
    first = location.publish()
    assert {name: kind for name, (kind, _) in first.items()} == dict.fromkeys(COPIES, "full")
    location.assert_copies()

    # One month of lineitem changes: only that month goes, only to the data source holding it.
    orders = pq.read_table(
        location.parquet / "orders.parquet", columns=["o_orderkey", "o_orderdate"]
    )
    in_month = pc.and_(
        pc.greater_equal(orders["o_orderdate"], pa.scalar(date(1995, 6, 1))),
        pc.less(orders["o_orderdate"], pa.scalar(date(1995, 7, 1))),
    )
    keys = pc.filter(orders["o_orderkey"], in_month)
    lineitem = location.parquet / "lineitem.parquet"
    ordered = pq.read_table(lineitem, columns=["l_orderkey"])["l_orderkey"]
    changed = rewrite(lineitem, "l_comment", pc.is_in(ordered, value_set=keys), "changed")
    location.run("monthly_job", partition_key=CHANGED, asset_selection=[dg.AssetKey("lineitem")])
    # The file's rows of the month are the changed rows, each changed, and no others.
    june = "l_orderdate >= DATE '1995-06-01' AND l_orderdate < DATE '1995-07-01'"
    assert changed
    assert query(
        location.hyper,
        location.database,
        f"SELECT COUNT(*) FILTER (WHERE l_comment = 'changed'), COUNT(*) FILTER (WHERE {june}), "
        f"""COUNT(*) FILTER (WHERE l_comment = 'changed' AND {june}) FROM "Extract".lineitem""",
    ) == [[changed, changed, changed]]
    assert location.publish() == {
        "Line items": ("update", [("Extract.lineitem", "window", changed)]),
        "Supply": ("none", []),
        "Orders": ("none", []),
    }
    location.assert_copies()

    # nation is refreshed with one name changed: each of its four copies follows, as an update.
    nation = location.parquet / "nation.parquet"
    keys = pq.read_table(nation, columns=["n_nationkey"])["n_nationkey"]
    assert rewrite(nation, "n_name", pc.equal(keys, 0), "ALGERIA (renamed)") == 1
    location.run("refresh_job", asset_selection=[dg.AssetKey("nation")])
    assert query(
        location.hyper,
        location.database,
        'SELECT n_name FROM "Extract".nation WHERE n_nationkey = 0',
    ) == [["ALGERIA (renamed)"]]
    assert location.publish() == dict.fromkeys(
        COPIES, ("update", [("Extract.nation", "replace", 25)])
    )
    location.assert_copies()
    assert not Outbox(location.database).changes()
