"""Races of an object-store home against moto's S3 server on loopback, the network's faults
played by a proxy in front of it (`StoreProxy`): a commit the store refused. Each test
reads the rows back from the home."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
import test_home
from dagster import AssetsDefinition, asset, materialize
from object_stores import StoreProxy
from test_home import generation, rows

from hyper_assets import HyperIOManager
from hyper_assets.errors import HomeStoreError
from hyper_assets.home import HomeSettings
from hyper_assets.stores import S3Settings

moto_s3, bucket = test_home.moto_s3, test_home.bucket  # its fixtures
KEY = "extracts/shop.hyper"
EVENTS = 'SELECT label, COUNT(*) FROM "Extract"."events" GROUP BY 1 ORDER BY 1'


def events(label: str) -> AssetsDefinition:
    """An asset that appends three rows tagged `label` to `events`."""

    @asset(name="events", metadata={"write_mode": "append"})
    def appended() -> pa.Table:
        return pa.table({"id": pa.array([1, 2, 3], pa.int64()), "label": [label] * 3})

    return appended


@pytest.fixture
def proxy(moto_s3: str) -> Iterator[StoreProxy]:
    with StoreProxy(moto_s3) as started:
        yield started


def through(proxy: StoreProxy, **settings: Any) -> HomeSettings:
    """Home settings that reach the store through `proxy`."""
    return HomeSettings(s3=S3Settings(endpoint_url=proxy.url), **settings)


def is_manifest(method: str, path: str) -> bool:
    return method == "PUT" and "/manifest/" in path


def append(uri: str, label: str, settings: HomeSettings) -> bool:
    io_manager = HyperIOManager(database=uri, home_settings=settings)
    return materialize([events(label)], resources={"io_manager": io_manager}).success


def test_a_commit_the_store_refused_is_reported_refused(bucket, proxy, tmp_path, hyper):
    """The manifest's create is answered 403 and never reaches the store: nothing was
    committed, and the write says so."""
    uri = f"s3://{bucket}/{KEY}"
    assert append(uri, "first", HomeSettings(working_dir=str(tmp_path / "first")))
    proxy.refuse(is_manifest)
    with pytest.raises(HomeStoreError, match="nothing was committed"):
        append(uri, "refused", through(proxy, working_dir=str(tmp_path / "refused")))
    assert proxy.reached.is_set() and generation(uri) == 1
    assert rows(hyper, uri, tmp_path / "read", EVENTS) == [["first", 3]]
