"""`HyperExtractComponent` in a project `create-dagster` scaffolds, driven by `dg` alone.

The project is new, in a temporary directory, and uses this repository's package from the
same virtual environment (its `src` on PYTHONPATH): `dg list components` finds the
component through the package's entry point, `dg scaffold defs` writes its defs.yaml, `dg
check defs` loads it and `dg launch` materialises the assets in a subprocess with its own
Spark; the test then reads the .hyper file (and the emulator's copy) back.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import (
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    Definitions,
    EnvVar,
    EventRecordsFilter,
    load_from_defs_folder,
)
from dagster.components.core.component_tree import ComponentTree
from helpers import query
from tableauhyperapi import Connection, TableName, TypeTag

from hyper_assets import (
    ComponentSpecError,
    ConnectedAppSignIn,
    HyperExtractComponent,
    MetadataKeyError,
    ProjectNotFoundError,
    TableauServerResource,
    TokenSignIn,
)
from hyper_assets._dagster.spec import TableSpec
from hyper_assets._engine.process import SharedHyper
from hyper_assets.emulator import Emulator

BIN = Path(sys.executable).parent
IN_PROCESS = json.dumps({"execution": {"config": {"in_process": {}}}})
SPARK = {
    "spark.master": "local[1]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
}
CUSTOMERS = [(1, "Ada", "Paris"), (2, "Grace", "Lyon"), (3, "Alan", "Paris")]
PRODUCTS = [(10, "tea", 2.5), (11, "cake", 4.0)]
ORDERS = {  # day -> (order_id, customer_id, product_id, quantity)
    "2024-01-01": [(100, 1, 10, 2), (101, 2, 11, 1)],
    "2024-01-02": [(102, 3, 10, 4), (103, 1, 11, 3), (104, 2, 10, 1)],
}


TOKEN, SECRET = "ci", "component-s3cret"


@pytest.fixture
def emulator(tmp_path: Path, hyper: SharedHyper) -> Iterator[Emulator]:
    """The local Tableau emulator on a free port; `dg launch` publishes to it."""
    data_dir = tmp_path / "server"
    data_dir.mkdir()
    with Emulator(data_dir, tokens={TOKEN: SECRET}, hyper=hyper) as running:
        yield running


class Project:
    """A project made by `create-dagster`, run with `dg` from this virtual environment."""

    def __init__(self, root: Path, name: str, home: Path) -> None:
        self.root, self.name = root, name
        self.env = {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(root / "src"),
            "DAGSTER_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SHOP_TABLEAU_SECRET": SECRET,
            "DAGSTER_DG_UPDATE_CHECK_ENABLED": "0",  # no PyPI lookup
        }

    @classmethod
    def create(cls, tmp_path: Path, name: str) -> Project:
        home = tmp_path / "dagster_home"
        home.mkdir()
        project = cls(tmp_path / name, name, home)
        subprocess.run(
            [BIN / "create-dagster", "project", "--no-uv-sync", name],
            cwd=tmp_path,
            env=project.env,
            check=True,
            capture_output=True,
        )
        return project

    @property
    def defs(self) -> Path:
        return self.root / "src" / self.name / "defs"

    def dg(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            [BIN / "dg", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, f"dg {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def launch(self, assets: str, *options: str) -> None:
        self.dg("launch", "--assets", assets, "--config-json", IN_PROCESS, *options, timeout=600)

    def write_defs(self, path: str, text: str) -> None:
        """Replaces the defs.yaml `dg scaffold defs` wrote at `path` (keeping its type line)."""
        defs_yaml = self.defs / path / "defs.yaml"
        assert defs_yaml.read_text().startswith("type: hyper_assets.HyperExtractComponent")
        defs_yaml.write_text(textwrap.dedent(text))

    def python_json(self, script: str) -> Any:
        """What `script`, run by Python in the project, prints as JSON on its last line."""
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(done.stdout.splitlines()[-1])

    def definitions_metadata(self) -> dict[str, dict[str, object]]:
        """Each asset's definition metadata, as the code location loads it (JSON-able)."""
        script = textwrap.dedent(f"""
            import json
            from pathlib import Path
            from dagster import load_from_defs_folder
            defs = load_from_defs_folder(path_within_project=Path("src/{self.name}"))
            graph = defs.resolve_asset_graph()
            print(json.dumps({{
                key.to_user_string(): {{
                    "column_schema": [c.name + " " + c.type for c in
                        graph.get(key).metadata["dagster/column_schema"].columns]
                    if "dagster/column_schema" in graph.get(key).metadata else None,
                    "column_lineage": {{
                        column: [d.asset_key.to_user_string() + "." + d.column_name
                                 for d in deps]
                        for column, deps in graph.get(key).metadata[
                            "dagster/column_lineage"].deps_by_column.items()
                    }} if "dagster/column_lineage" in graph.get(key).metadata else None,
                    "kinds": sorted(graph.get(key).kinds),
                    "owners": list(graph.get(key).owners),
                    "tags": {{k: v for k, v in graph.get(key).tags.items()
                              if not k.startswith("dagster/kind/")}},
                    "group": graph.get(key).group_name,
                    "description": graph.get(key).description,
                    "checks": sorted(c.name for c in graph.get(key).check_keys),
                    "automation": str(graph.get(key).automation_condition or ""),
                }}
                for key in graph.get_all_asset_keys() if graph.get(key).is_materializable
            }}))
        """)
        return self.python_json(script)

    def instance(self) -> DagsterInstance:
        """The project's Dagster instance (its DAGSTER_HOME), read from this process."""
        return DagsterInstance.from_config(self.env["DAGSTER_HOME"])

    def materialization_lineage(self, key: str) -> dict[str, list[str]]:
        """The `dagster/column_lineage` of `key`'s latest materialisation."""
        with self.instance() as instance:
            event = instance.get_latest_materialization_event(AssetKey(key))
        assert event is not None and event.asset_materialization is not None, key
        lineage = event.asset_materialization.metadata["dagster/column_lineage"].value
        return {
            column: [d.asset_key.to_user_string() + "." + d.column_name for d in deps]
            for column, deps in lineage.deps_by_column.items()
        }

    def check_results(self) -> dict[str, bool]:
        """`asset:check` -> passed, for the latest evaluation of every check."""
        with self.instance() as instance:
            records = instance.get_event_records(
                EventRecordsFilter(DagsterEventType.ASSET_CHECK_EVALUATION), ascending=True
            )
        out = {}
        for record in records:
            evaluation = record.event_log_entry.dagster_event.event_specific_data
            out[f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}"] = (
                evaluation.passed
            )
        return out


def _write_sources(root: Path, orders: Mapping[str, list[tuple[int, int, int, int]]]) -> None:
    """The star schema's raw files: customers as CSV, products as Parquet, orders as JSON."""
    data = root / "data"
    (data / "orders").mkdir(parents=True, exist_ok=True)
    (data / "customers.csv").write_text(
        "customer_id,name,city\n" + "".join(f"{i},{n},{c}\n" for i, n, c in CUSTOMERS)
    )
    pq.write_table(
        pa.table(
            {
                "product_id": [p[0] for p in PRODUCTS],
                "product_name": [p[1] for p in PRODUCTS],
                "unit_price": [p[2] for p in PRODUCTS],
            }
        ),
        data / "products.parquet",
    )
    for day, rows in orders.items():
        (data / "orders" / f"orders_{day}.json").write_text(
            "".join(
                json.dumps(
                    {
                        "order_id": o,
                        "customer_id": c,
                        "product_id": p,
                        "quantity": q,
                        "order_date": day,
                    }
                )
                + "\n"
                for o, c, p, q in rows
            )
        )


def _tables(hyper: SharedHyper, database: Path) -> dict[str, list[tuple]]:
    """Every table of `database` as `schema.table` -> its rows, sorted."""
    out = {}
    with Connection(hyper.endpoint, str(database)) as connection:
        for schema in connection.catalog.get_schema_names():
            for table in connection.catalog.get_table_names(schema):
                rows = connection.execute_list_query(f"SELECT * FROM {table}")
                out[f"{schema.name.unescaped}.{table.name.unescaped}"] = sorted(
                    (tuple(row) for row in rows), key=repr
                )
    return out


def _assert_published_copy_equals(hyper: SharedHyper, emulator: Emulator, local: Path) -> None:
    remote = emulator.data_dir / "Shop Sales.hyper"
    mine, theirs = _tables(hyper, local), _tables(hyper, remote)
    assert mine and mine == theirs


def _spark_yaml(indent: int) -> str:
    pad = " " * indent
    return "\n".join(f'{pad}{k}: "{v}"' for k, v in SPARK.items())


def _publish_yaml(url: str) -> str:
    return f"""\
  publish:
    datasource: Shop Sales
    project: Default
    description: Sales for the shop's Tableau workbooks.
    owners: [team:bi]
    server:
      server_url: "{url}"
      sign_in: {{name: {TOKEN}, secret_env: SHOP_TABLEAU_SECRET}}
    automation_condition: "{{{{ dg.AutomationCondition.on_cron('0 * * * *') }}}}"
  checks:
    publish_max_lag_minutes: 60
"""


STAR_SCHEMA = f"""\
type: hyper_assets.HyperExtractComponent
attributes:
  database: data/shop.hyper
  group_name: shop
  owners: [team:analytics]
  tags: {{domain: retail}}
  spark:
    config:
{_spark_yaml(6)}
  tables:
    - name: customers
      description: Customers, from the CRM's CSV export.
      source: {{format: csv, path: data/customers.csv, options: {{header: "true"}}}}
      columns:
        - {{name: customer_id, type: INT, description: The CRM's id}}
        - {{name: name, type: STRING}}
        - {{name: city, type: STRING}}
      primary_key: [customer_id]
      not_null: [city]
    - name: products
      source: {{format: parquet, path: data/products.parquet}}
      primary_key: [product_id]
      write_mode: upsert
      owners: [ops@example.com]
    - name: orders
      source: {{format: json, path: "data/orders/orders_{{partition_key}}.json"}}
      columns:
        - {{name: order_id, type: BIGINT}}
        - {{name: order_date, type: DATE}}
        - {{name: customer_id, type: INT}}
        - {{name: product_id, type: BIGINT}}
        - {{name: quantity, type: INT}}
      partitions_def: {{type: daily, start_date: "2024-01-01", end_date: "2024-01-03"}}
      partition_expr: order_date
      primary_key: [order_id]
      foreign_keys:
        customer_id: customers.customer_id
        product_id: products.product_id
    - name: sales
      sql: |
        SELECT o.order_id, o.order_date, c.city, p.product_name,
               o.quantity * p.unit_price AS amount
        FROM orders o
        JOIN customers c ON c.customer_id = o.customer_id
        JOIN products p ON p.product_id = o.product_id
        WHERE o.order_date >= CAST(:partition_start AS DATE)
      tags: {{layer: mart}}
      partitions_def: {{type: daily, start_date: "2024-01-01", end_date: "2024-01-03"}}
      partition_expr: order_date
      foreign_keys:  # one star, as Tableau needs: sales -> orders -> customers, products
        order_id: orders.order_id
"""


def _rows(hyper: SharedHyper, database: Path, table: str) -> list[tuple]:
    name = TableName("Extract", table)
    return [tuple(r) for r in query(hyper, database, f"SELECT * FROM {name} ORDER BY 1")]


def _plain(rows: list[tuple]) -> list[tuple]:
    return [tuple(v.to_date() if hasattr(v, "to_date") else v for v in row) for row in rows]


@pytest.mark.slow
def test_a_yaml_only_project_builds_and_publishes_a_star_schema_extract(
    tmp_path: Path, hyper: SharedHyper, emulator: Emulator
) -> None:
    project = Project.create(tmp_path, "shop")
    listed = json.loads(project.dg("list", "components", "--json"))["items"]
    assert "hyper_assets.HyperExtractComponent" in [c["key"] for c in listed]
    project.dg("scaffold", "defs", "hyper_assets.HyperExtractComponent", "extract")
    assert "All definitions loaded successfully" in project.dg("check", "defs")  # the template
    project.write_defs("extract", STAR_SCHEMA + _publish_yaml(emulator.url))
    _write_sources(project.root, ORDERS)

    assert "All definitions loaded successfully" in project.dg("check", "defs")
    assets = project.definitions_metadata()
    published = assets.pop("shop_sales")  # dagster-tableau's key for "Shop Sales"
    assert set(assets) == {"customers", "products", "orders", "sales"}
    assert published["kinds"] == ["tableau"]
    assert published["owners"] == ["team:analytics", "team:bi"]
    assert published["description"] == "Sales for the shop's Tableau workbooks."
    assert published["checks"] == ["published_copy_fresh"]
    assert "0 * * * *" in published["automation"]
    assert published["column_lineage"] == {  # the tables that declare their columns
        **{f"customers.{c}": [f"customers.{c}"] for c in ("customer_id", "name", "city")},
        **{
            f"orders.{c}": [f"orders.{c}"]
            for c in ("order_id", "order_date", "customer_id", "product_id", "quantity")
        },
    }
    assert assets["customers"]["column_schema"] == [
        "customer_id INT",
        "name STRING",
        "city STRING",
    ]
    assert assets["sales"]["column_schema"] is None  # no columns declared: known after a run
    for name, asset in assets.items():
        assert asset["kinds"] == ["hyper", "spark"], name
        assert asset["group"] == "shop"
        assert asset["tags"]["domain"] == "retail"
        assert asset["tags"]["dagster/storage_kind"] == "hyper"
        assert "team:analytics" in asset["owners"]
    assert assets["products"]["owners"] == ["team:analytics", "ops@example.com"]
    assert assets["sales"]["tags"]["layer"] == "mart"
    assert assets["customers"]["description"] == "Customers, from the CRM's CSV export."
    assert assets["customers"]["checks"] == [
        "columns_not_null",
        "primary_key_unique",
        "row_count_vs_previous",
    ]
    assert "foreign_keys_resolve" in assets["orders"]["checks"]

    project.launch("customers,products")
    project.launch("orders,sales", "--partition-range", "2024-01-01...2024-01-02")

    database = project.root / "data" / "shop.hyper"
    assert _rows(hyper, database, "customers") == CUSTOMERS
    assert _rows(hyper, database, "products") == PRODUCTS
    day = dt.date.fromisoformat
    assert _plain(_rows(hyper, database, "orders")) == sorted(
        (o, day(d), c, p, q) for d, rows in ORDERS.items() for o, c, p, q in rows
    )
    city = {c[0]: c[2] for c in CUSTOMERS}
    product = {p[0]: p for p in PRODUCTS}
    expected_sales = sorted(
        (o, day(d), city[c], product[p][1], q * product[p][2])
        for d, rows in ORDERS.items()
        for o, c, p, q in rows
    )
    assert _plain(_rows(hyper, database, "sales")) == expected_sales
    checks = project.check_results()
    assert checks["customers:primary_key_unique"] and checks["orders:foreign_keys_resolve"]
    assert checks["customers:columns_not_null"]

    project.launch("shop_sales")
    _assert_published_copy_equals(hyper, emulator, database)
    lineage = project.materialization_lineage("shop_sales")
    assert lineage["sales.amount"] == ["sales.amount"]
    assert lineage["products.unit_price"] == ["products.unit_price"]
    assert len(lineage) == 3 + 3 + 5 + 5

    # A day that lands again replaces its rows, and only its rows; the publish follows.
    changed = {"2024-01-02": [(105, 3, 11, 2)]}
    _write_sources(project.root, changed)
    project.launch("orders,sales,shop_sales", "--partition", "2024-01-02")
    assert _plain(_rows(hyper, database, "sales")) == [
        *expected_sales[:2],
        (105, day("2024-01-02"), "Paris", "cake", 8.0),
    ]
    _assert_published_copy_equals(hyper, emulator, database)
    assert project.check_results()["shop_sales:published_copy_fresh"]


TWO_STARS = f"""\
type: hyper_assets.HyperExtractComponent
attributes:
  database: data/shop.hyper
  spark:
    config:
{_spark_yaml(6)}
  tables:
    - name: customers
      source: {{format: csv, path: data/customers.csv, options: {{header: "true"}}}}
      columns:
        - {{name: customer_id, type: INT}}
        - {{name: name, type: STRING}}
        - {{name: city, type: STRING}}
      primary_key: [customer_id]
    - name: products
      source: {{format: parquet, path: data/products.parquet}}
      primary_key: [product_id]
      write_mode: upsert
      schema_evolution: add_columns
    - name: orders
      source: {{format: json, path: "data/orders/orders_{{partition_key}}.json"}}
      columns:
        - {{name: order_id, type: BIGINT}}
        - {{name: order_date, type: DATE}}
        - {{name: customer_id, type: INT}}
        - {{name: product_id, type: BIGINT}}
        - {{name: quantity, type: INT}}
      partitions_def: {{type: daily, start_date: "2024-01-01", end_date: "2024-01-03"}}
      partition_expr: order_date
      primary_key: [order_id]
      foreign_keys: {{customer_id: customers.customer_id, product_id: products.product_id}}
    - name: cities
      sql: |
        SELECT DISTINCT city, CASE city WHEN 'Paris' THEN 'POINT(2.3522 48.8566)'
                                        ELSE 'POINT(4.8357 45.764)' END AS location
        FROM customers
      columns: [{{name: city, type: STRING}}, {{name: location, type: STRING}}]
      primary_key: [city]
      geography_columns: [location]
  publish:
    - datasource: Shop Orders
      tables: [orders, customers, products]
      server:
        server_url: "{{url}}"
        sign_in: {{name: {TOKEN}, secret_env: SHOP_TABLEAU_SECRET}}
    - datasource: Shop Cities
      tables: [Extract.cities]
"""


def _assert_copy_holds(
    hyper: SharedHyper, emulator: Emulator, local: Path, datasource: str, held: set[str]
) -> None:
    """The emulator's copy of `datasource` holds the local file's tables `held`, no other."""
    mine = _tables(hyper, local)
    theirs = _tables(hyper, emulator.data_dir / f"{datasource}.hyper")
    assert theirs == {f"Extract.{t}": mine[f"Extract.{t}"] for t in held}


@pytest.mark.slow
def test_a_yaml_project_publishes_two_stars_with_a_map_and_a_new_column(
    tmp_path: Path, hyper: SharedHyper, emulator: Emulator
) -> None:
    project = Project.create(tmp_path, "stars")
    project.dg("scaffold", "defs", "hyper_assets.HyperExtractComponent", "extract")
    project.write_defs("extract", TWO_STARS.replace("{url}", emulator.url))
    _write_sources(project.root, ORDERS)
    assets = project.definitions_metadata()
    assert set(assets) == {
        "customers",
        "products",
        "orders",
        "cities",
        "shop_orders",
        "shop_cities",
    }

    project.launch("customers,products,cities")
    project.launch("orders", "--partition-range", "2024-01-01...2024-01-02")
    database = project.root / "data" / "shop.hyper"
    with Connection(hyper.endpoint, str(database)) as connection:
        table = connection.catalog.get_table_definition(TableName("Extract", "cities"))
        assert table.get_column_by_name("location").type.tag == TypeTag.TABGEOGRAPHY
    sql = 'SELECT city, CAST(location AS TEXT) FROM "Extract".cities ORDER BY 1'
    assert query(hyper, database, sql) == [
        ["Lyon", "POINT(4.8357000 45.7640000)"],
        ["Paris", "POINT(2.3522000 48.8566000)"],
    ]
    project.launch("shop_orders,shop_cities")
    _assert_copy_holds(
        hyper, emulator, database, "Shop Orders", {"orders", "customers", "products"}
    )
    _assert_copy_holds(hyper, emulator, database, "Shop Cities", {"cities"})
    with Connection(hyper.endpoint, str(emulator.data_dir / "Shop Cities.hyper")) as connection:
        table = connection.catalog.get_table_definition(TableName("Extract", "cities"))
        assert table.get_column_by_name("location").type.tag == TypeTag.TABGEOGRAPHY

    # Products gain a category: the upsert adds the column, NULL for the product not sent.
    pq.write_table(
        pa.table(
            {
                "product_id": [11],
                "product_name": ["cake"],
                "unit_price": [4.5],
                "category": ["sweet"],
            }
        ),
        project.root / "data" / "products.parquet",
    )
    project.launch("products,shop_orders,shop_cities")
    assert _rows(hyper, database, "products") == [
        (10, "tea", 2.5, None),
        (11, "cake", 4.5, "sweet"),
    ]
    _assert_copy_holds(
        hyper, emulator, database, "Shop Orders", {"orders", "customers", "products"}
    )
    _assert_copy_holds(hyper, emulator, database, "Shop Cities", {"cities"})


def _build(attributes: dict) -> Definitions:
    component = HyperExtractComponent.from_attributes_dict(attributes=attributes)
    return component.build_defs(ComponentTree.for_test().load_context)


CSV = {"format": "csv", "path": "data/x.csv"}
DAILY = {"type": "daily", "start_date": "2024-01-01"}
TABLEAU = {"server_url": "http://127.0.0.1:9", "sign_in": {"name": "ci", "secret_env": "SECRET"}}


@pytest.mark.parametrize(
    ("attributes", "field", "says"),
    [
        ({}, "attributes", "declares no table"),
        ({"tables": [{"name": "a b", "source": CSV}]}, "tables[0].name", "letters, digits"),
        ({"tables": [{"name": "a"}]}, "tables[0]", "one of source, sql"),
        (
            {"tables": [{"name": "a", "source": CSV}, {"name": "a", "source": CSV}]},
            "tables[1].name",
            "declared twice",
        ),
        (
            {"tables": [{"name": "a", "sql": "SELECT 1", "inputs": ["b"]}]},
            "tables[0].inputs",
            "not other tables",
        ),
        (
            {"tables": [{"name": "a", "source": CSV, "partitions_def": DAILY}]},
            "tables[0].partition_expr",
            "name the column",
        ),
        (
            {
                "tables": [
                    {"name": "a", "source": CSV, "partitions_def": DAILY, "partition_expr": "d"}
                ]
            },
            "tables[0].source.path",
            "{partition_key}",
        ),
        (
            {"tables": [{"name": "a", "source": CSV, "write_mode": "upsert"}]},
            "tables[0].primary_key",
            "needs a primary key",
        ),
        (
            {
                "tables": [
                    {
                        "name": "a",
                        "source": CSV,
                        "columns": [{"name": "x", "type": "INT"}],
                        "not_null": ["y"],
                    }
                ]
            },
            "tables[0].not_null",
            "not among its columns",
        ),
        (
            {"tables": [{"name": "a", "source": CSV, "schema_evolution": "add"}]},
            "tables[0].schema_evolution",
            "table 'a' gives 'add'; use add_columns",
        ),
        (
            {"tables": [{"name": "a", "source": CSV, "schema_evolution": "add_columns"}]},
            "tables[0].schema_evolution",
            "table 'a' is replaced whole",
        ),
        (
            {
                "tables": [
                    {
                        "name": "a",
                        "source": CSV,
                        "columns": [{"name": "x", "type": "DOUBLE"}],
                        "geography_columns": ["x", "y"],
                    }
                ]
            },
            "tables[0].geography_columns",
            "table 'a' names ['x', 'y'], which are not STRING columns",
        ),
        (
            {"tables": [{"name": "a", "source": CSV, "geography_columns": ["x", "x"]}]},
            "tables[0].geography_columns",
            "list each column once",
        ),
        (
            {
                "tables": [{"name": "a", "source": CSV}],
                "publish": [{"datasource": "DS A", "tables": ["a", "Extract.b"]}],
            },
            "publish[0].tables",
            "names ['Extract.b'], not tables of this component; it stores ['Extract.a']",
        ),
        (
            {
                "tables": [{"name": "a", "source": CSV}],
                "publish": {"datasource": "DS A", "tables": []},
            },
            "publish.tables",
            "names no table",
        ),
        (
            {
                "tables": [{"name": "a", "source": CSV}],
                "publish": [{"datasource": "DS A"}, {"datasource": "DS A", "key": "a2"}],
            },
            "publish[1].datasource",
            "data source 'DS A' of project 'Default' has the datasource of attributes.publish[0]",
        ),
        (
            {
                "tables": [{"name": "a", "source": CSV}],
                "publish": [{"datasource": "DS A"}, {"datasource": "DS B"}],
                "checks": {"publish_max_lag_minutes": 5},
            },
            "checks.publish_max_lag_minutes",
            "2 data sources are published",
        ),
        (
            {"tables": [{"name": "a", "source": CSV}], "checks": {"publish_max_lag_minutes": 5}},
            "checks.publish_max_lag_minutes",
            "publishes no data source, so it would be ignored",
        ),
        (
            {
                "tables": [{"name": "a", "source": CSV, "not_null": ["x"]}],
                "checks": {"enabled": False, "min_row_ratio": 0.9},
            },
            "checks.enabled",
            "is false, so the component defines no checks, and checks.min_row_ratio, "
            "tables[0].not_null would be ignored",
        ),
        (
            {
                "tables": [{"name": "a", "source": CSV}],
                "adopt": {"defs_path": "assets.py", "keys": ["b"], "not_null": {"b": ["x"]}},
                "checks": {"enabled": False},
            },
            "checks.enabled",
            "and adopt.not_null would be ignored",
        ),
        (
            {
                "tables": [{"name": "a", "source": CSV}],
                "publish": [
                    {"datasource": "DS A", "server": TABLEAU},
                    {"datasource": "DS B", "server": {**TABLEAU, "site": "other"}},
                ],
            },
            "publish[1].server",
            "another data source defines resource 'tableau'",
        ),
    ],
)
def test_bad_attributes_name_the_yaml_field(attributes: dict, field: str, says: str) -> None:
    with pytest.raises(ComponentSpecError) as raised:
        _build(attributes)
    assert str(raised.value).startswith(
        f"{field if field == 'attributes' else 'attributes.' + field}:"
    )
    assert says in str(raised.value)


def test_the_server_signs_in_with_a_token_or_a_connected_app_not_the_old_flat_fields() -> None:
    def server(spec: dict) -> TableauServerResource:
        publish = {"datasource": "DS", "server": spec}
        resource = _build({"tables": [{"name": "a", "source": CSV}], "publish": publish})
        return resource.resources["tableau"]

    token = server(TABLEAU).sign_in
    assert isinstance(token, TokenSignIn) and token.name == "ci"
    assert isinstance(token.secret, EnvVar) and token.secret.env_var_name == "SECRET"
    app = {"client_id": "c", "secret_id": "s", "secret_value_env": "APP_SECRET", "username": "u"}
    connected = server({**TABLEAU, "sign_in": app}).sign_in
    assert isinstance(connected, ConnectedAppSignIn)
    assert (connected.client_id, connected.secret_id, connected.username) == ("c", "s", "u")
    assert isinstance(connected.secret_value, EnvVar)
    assert connected.secret_value.env_var_name == "APP_SECRET"
    old = {"server_url": "http://127.0.0.1:9", "token_name": "ci", "token_secret_env": "SECRET"}
    with pytest.raises(Exception, match=r"(?s)sign_in.*Field required.*token_name"):
        server(old)


def test_sql_inputs_default_to_the_tables_it_reads() -> None:
    defs = _build(
        {
            "spark": {"config": {}},
            "tables": [
                {"name": "a", "source": CSV},
                {"name": "b", "source": CSV},
                {"name": "c", "sql": "SELECT * FROM a JOIN `b` USING (k) WHERE k IN (SELECT 1)"},
            ],
        }
    )
    graph = defs.resolve_asset_graph()
    assert graph.get(AssetKey("c")).parent_keys == {AssetKey("a"), AssetKey("b")}


def test_new_table_options_reach_the_metadata_the_io_manager_parses() -> None:
    defs = _build(
        {
            "spark": {"config": {}},
            "tables": [
                {
                    "name": "sites",
                    "source": CSV,
                    "columns": [{"name": "id", "type": "INT"}, {"name": "at", "type": "string"}],
                    "geography_columns": ["at"],
                    "write_mode": "append",
                    "schema_evolution": "add_columns",
                },
                {"name": "plain", "source": CSV},
            ],
        }
    )
    graph = defs.resolve_asset_graph()
    specs = {
        name: TableSpec.parse([name], graph.get(AssetKey(name)).metadata, "Extract")
        for name in ("sites", "plain")
    }
    assert (specs["sites"].add_columns, specs["sites"].geography) == (True, ("at",))
    assert (specs["plain"].add_columns, specs["plain"].geography) == (False, ())


def test_publish_takes_a_list_of_data_sources_each_holding_its_tables() -> None:
    tables = [
        {"name": "fact", "source": CSV, "foreign_keys": {"d": "dim.d"}},
        {"name": "other", "source": CSV, "foreign_keys": {"d": "dim.d"}},
        {"name": "dim", "source": CSV, "primary_key": ["d"]},
    ]
    publish = [
        {"datasource": "Facts", "tables": ["fact", "Extract.dim"], "server": TABLEAU},
        {"datasource": "Others", "project": "Ops", "tables": ["other", "dim"]},
        {"datasource": "Everything", "key": "all_tables"},
    ]
    defs = _build({"spark": {"config": {}}, "tables": tables, "publish": publish})
    graph = defs.resolve_asset_graph()
    parents = {
        key: {p.to_user_string() for p in graph.get(AssetKey(key)).parent_keys}
        for key in ("facts", "others", "all_tables")
    }
    assert parents == {
        "facts": {"fact", "dim"},
        "others": {"other", "dim"},
        "all_tables": {"fact", "other", "dim"},
    }
    metadata = {key: graph.get(AssetKey(key)).metadata for key in parents}
    assert metadata["others"]["project"] == "Ops"
    assert metadata["facts"]["data_model"].value.splitlines()[2:] == [
        "| Extract.fact | fact | |",
        "| Extract.dim | dimension | Extract.fact.d -> Extract.dim.d |",
    ]
    assert metadata["all_tables"]["data_model"].value.startswith("Would refuse: ")
    assert isinstance(defs.resources["tableau"], TableauServerResource)


@pytest.mark.parametrize("partitioned", [True, False])
def test_a_partitioned_tables_checks_are_partitioned_unless_told_not_to(partitioned: bool) -> None:
    table = {"name": "a", "sql": "SELECT 1 AS d", "partitions_def": DAILY, "partition_expr": "d"}
    defs = _build(
        {
            "spark": {"config": {}},
            "tables": [{**table, "primary_key": ["d"]}, {"name": "b", "source": CSV}],
            "checks": {"partitioned": partitioned},
        }
    )
    specs = {
        (spec.asset_key.to_user_string(), spec.name): spec.partitions_def
        for checks in defs.asset_checks or []
        for spec in checks.check_specs
    }
    assert set(specs) == {
        ("a", "primary_key_unique"),
        ("a", "row_count_vs_previous"),
        ("b", "row_count_vs_previous"),
    }
    assert (specs["a", "primary_key_unique"] is not None) == partitioned
    assert specs["b", "row_count_vs_previous"] is None


PYTHON_RESOURCES = """\
from pathlib import Path

import dagster as dg
from dagster_pyspark import PySparkResource

from hyper_assets import HyperIOManager

ROOT = Path(__file__).parents[3]


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(
        resources={
            "io_manager": HyperIOManager(database=str(ROOT / "data" / "legacy.hyper")),
            "pyspark": PySparkResource(spark_config=SPARK),
        }
    )
"""

PYTHON_ASSETS = '''\
"""Hand-written Spark assets, as a project has them before it adopts the component."""

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame


@dg.asset(group_name="sales", metadata={"primary_key": ["store_id"]})
def stores(pyspark: PySparkResource) -> DataFrame:
    return pyspark.spark_session.sql(
        "SELECT * FROM VALUES (1, 'Paris'), (2, 'Lyon') AS t(store_id, city)"
    )


@dg.asset(
    group_name="sales",
    deps=[stores],
    metadata={"foreign_keys": {"store_id": "Extract.stores.store_id"}},
)
def receipts(pyspark: PySparkResource) -> DataFrame:
    return pyspark.spark_session.sql(
        "SELECT * FROM VALUES (10, 1, 9.5), (11, 2, 20.0), (12, 1, NULL) "
        "AS t(receipt_id, store_id, amount)"
    )


@dg.asset(group_name="scratch")
def scratch(pyspark: PySparkResource) -> DataFrame:
    return pyspark.spark_session.sql("SELECT 1 AS one")
'''


@pytest.mark.slow
def test_existing_python_assets_adopt_checks_and_publish(
    tmp_path: Path, hyper: SharedHyper, emulator: Emulator
) -> None:
    project = Project.create(tmp_path, "legacy")
    (project.defs / "resources.py").write_text(PYTHON_RESOURCES.replace("SPARK)", f"{SPARK!r})"))
    (project.defs / "pipeline").mkdir()
    (project.defs / "pipeline" / "__init__.py").write_text("")
    (project.defs / "pipeline" / "assets.py").write_text(PYTHON_ASSETS)
    project.dg("scaffold", "defs", "hyper_assets.HyperExtractComponent", "extract")
    project.write_defs(
        "extract",
        textwrap.dedent("""\
            type: hyper_assets.HyperExtractComponent
            attributes:
              adopt:
                defs_path: pipeline
                groups: [sales]
                not_null: {receipts: [amount]}
              owners: [team:analytics]
        """)
        + _publish_yaml(emulator.url),
    )

    assert "All definitions loaded successfully" in project.dg("check", "defs")
    assets = project.definitions_metadata()
    assert set(assets) == {"stores", "receipts", "scratch", "shop_sales"}
    assert assets["stores"]["checks"] == ["primary_key_unique", "row_count_vs_previous"]
    assert assets["receipts"]["checks"] == [
        "columns_not_null",
        "foreign_keys_resolve",
        "row_count_vs_previous",
    ]
    assert assets["scratch"]["checks"] == []  # not adopted
    assert assets["shop_sales"]["owners"] == ["team:analytics", "team:bi"]

    # One run writes and publishes (`dg launch` starts Python and Spark once per run).
    project.launch("stores,receipts,shop_sales")

    database = project.root / "data" / "legacy.hyper"
    assert _rows(hyper, database, "stores") == [(1, "Paris"), (2, "Lyon")]
    _assert_published_copy_equals(hyper, emulator, database)
    assert set(_tables(hyper, database)) == {"Extract.stores", "Extract.receipts"}
    checks = project.check_results()
    assert checks["stores:primary_key_unique"]
    assert checks["receipts:foreign_keys_resolve"]
    assert not checks["receipts:columns_not_null"]  # receipt 12 has no amount
    assert checks["shop_sales:published_copy_fresh"]
    assert project.materialization_lineage("shop_sales") == {
        "stores.store_id": ["stores.store_id"],
        "stores.city": ["stores.city"],
        "receipts.receipt_id": ["receipts.receipt_id"],
        "receipts.store_id": ["receipts.store_id"],
        "receipts.amount": ["receipts.amount"],
    }


ADOPTABLE = """\
import dagster as dg


@dg.asset(group_name="sales", metadata={"primary_key": ["id"]})
def stores(): ...


@dg.asset(group_name="sales", io_manager_key="other_io_manager")
def elsewhere(): ...
"""
RESOURCES = """\
import dagster as dg


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources={"other_io_manager": dg.FilesystemIOManager()})
"""


def _load_project(
    tmp_path: Path, name: str, attributes: str, assets: str = ADOPTABLE
) -> Definitions:
    """A dg project's definitions: assets.py as the project has them, the component beside."""
    defs = tmp_path / "src" / name / "defs"
    (defs / "pipeline").mkdir(parents=True)
    (defs / "extract").mkdir()
    for package in (defs.parent, defs, defs / "pipeline"):
        (package / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\n[tool.dg]\ndirectory_type = "project"\n'
        f'[tool.dg.project]\nroot_module = "{name}"\n'
    )
    (defs / "pipeline" / "assets.py").write_text(assets)
    (defs / "resources.py").write_text(RESOURCES)
    (defs / "extract" / "defs.yaml").write_text(
        "type: hyper_assets.HyperExtractComponent\nattributes:\n"
        + textwrap.indent(textwrap.dedent(attributes), "  ")
    )
    sys.path.insert(0, str(tmp_path / "src"))
    try:
        return load_from_defs_folder(path_within_project=defs)
    finally:
        sys.path.remove(str(tmp_path / "src"))


def test_adopt_selects_existing_assets_by_key(tmp_path: Path) -> None:
    defs = _load_project(
        tmp_path,
        "adopt_by_key",
        """\
        adopt: {defs_path: pipeline, keys: [stores]}
        publish:
          datasource: Store Data
          server: {server_url: "http://127.0.0.1:9", sign_in: {name: ci, secret_env: SECRET}}
        """,
    )
    graph = defs.resolve_asset_graph()
    assert {c.name for c in graph.get(AssetKey("stores")).check_keys} == {
        "primary_key_unique",
        "row_count_vs_previous",
    }
    assert not graph.get(AssetKey("elsewhere")).check_keys
    assert graph.get(AssetKey("store_data")).parent_keys == {AssetKey("stores")}


@pytest.mark.parametrize("match_case", [False, True])
def test_the_server_spec_finds_a_project_in_another_case_unless_told_not_to(
    tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch, match_case: bool
) -> None:
    monkeypatch.setenv("SHOP_TABLEAU_SECRET", SECRET)
    defs = _load_project(
        tmp_path,
        f"project_case_{match_case}".lower(),
        f"""\
        adopt: {{defs_path: pipeline, keys: [stores]}}
        publish:
          datasource: Store Data
          project: default
          server: {{server_url: "{emulator.url}",
                   sign_in: {{name: {TOKEN}, secret_env: SHOP_TABLEAU_SECRET}},
                   project_match_case: {str(match_case).lower()}}}
        """,
    )
    tableau = defs.resources["tableau"]
    assert isinstance(tableau, TableauServerResource)
    assert tableau.project_match_case is match_case
    with tableau.client() as client:
        if match_case:
            with pytest.raises(ProjectNotFoundError, match="no project 'default'") as none:
                client.project("default")
            assert none.value.candidates == ["Default"]
        else:
            assert client.project("default").name == "Default"


def test_an_adopted_assets_misspelt_metadata_key_fails_as_the_project_loads(
    tmp_path: Path,
) -> None:
    """Even with no check and no publish to read it: `adopt` takes it in as it is."""
    misspelt = ADOPTABLE.replace('"primary_key"', '"primary_keys"')
    with pytest.raises(Exception, match="Error while building definitions") as raised:
        _load_project(
            tmp_path,
            "adopt_misspelt",
            "adopt: {defs_path: pipeline, keys: [stores]}\nchecks: {enabled: false}\n",
            misspelt,
        )
    cause = raised.value.__cause__
    assert isinstance(cause, MetadataKeyError)
    assert str(cause).startswith(
        "Metadata key 'primary_keys' of asset 'stores' is not one hyper-assets reads: did "
        "you mean 'primary_key'"
    )


@pytest.mark.parametrize(
    ("adopt", "field", "says"),
    [
        ("{defs_path: pipeline, keys: [shops]}", "adopt.keys", "['shops'] are not assets"),
        ("{defs_path: pipeline, groups: [sale]}", "adopt.groups", "['sale'] are not groups"),
        ("{defs_path: pipeline, groups: [sales]}", "io_manager_key", "'other_io_manager'"),
        (
            "{defs_path: pipeline, keys: [stores]}\npublish: {datasource: Stores}",
            "publish.key",
            "the key of table asset stores",
        ),
    ],
)
def test_adopt_errors_name_the_field(tmp_path: Path, adopt: str, field: str, says: str) -> None:
    name = f"adopt_error_{field.replace('.', '_')}"
    with pytest.raises(Exception, match="Error while building definitions") as raised:
        _load_project(tmp_path, name, f"adopt: {adopt}\n")
    cause = raised.value.__cause__
    assert isinstance(cause, ComponentSpecError)
    assert str(cause).startswith(f"attributes.{field}: ")
    assert says in str(cause)
