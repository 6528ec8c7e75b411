"""Configuration said once: settings that would be ignored are refused, naming both and
the fix, before anything is written; S3's secrets are marked secret in both spellings and
shown nowhere; Tableau's defaults come from one place in every spelling."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import httpx
import pyarrow as pa
import pytest
from dagster import DagsterInstance, EnvVar, asset, materialize
from dagster.components.core.component_tree import ComponentTree
from object_stores import moto_server

from hyper_assets import (
    AzureSettings,
    ConfigurationError,
    HomeSettings,
    HyperDatabase,
    HyperExtractComponent,
    HyperIOManager,
    HyperResource,
    S3Settings,
    S3Staging,
    TableauServerResource,
    TokenSignIn,
)
from hyper_assets._rows.staging import StagingArea
from hyper_assets.tableau._rest.settings import ClientSettings, TokenCredentials
from hyper_assets.tableau._rest.transport import HttpSettings, RetryPolicy, Transport

SECRET = "s3cr3t-of-the-settings-tests"


def _db(tmp_path: Path) -> HyperDatabase:
    return HyperDatabase(database=str(tmp_path / "shop.hyper"))


#: (what is built, the settings its refusal names). Each would ignore one of them.
REFUSED: list[tuple[str, Callable[[Path], object], tuple[str, ...]]] = [
    (
        "hyper_database and hyper",
        lambda p: HyperIOManager(hyper_database=_db(p), hyper=HyperResource(log_dir=str(p))),
        ("hyper_database=", "hyper=", "HyperDatabase(database=..., hyper="),
    ),
    (
        "hyper_database and home_settings",
        lambda p: HyperIOManager(
            hyper_database=_db(p), home_settings=HomeSettings(working_dir=str(p))
        ),
        ("hyper_database=", "home_settings=", "settings=HomeSettings(...)"),
    ),
    (
        "database=HyperDatabase and hyper",
        lambda p: HyperIOManager(database=_db(p), hyper=HyperResource()),
        ("database=HyperDatabase(...)", "hyper=", "to the HyperDatabase alone"),
    ),
    (
        "database=HyperDatabase and home_settings",
        lambda p: HyperIOManager(database=_db(p), home_settings=HomeSettings()),
        ("database=HyperDatabase(...)", "home_settings=", "to the HyperDatabase alone"),
    ),
    (
        "database=HyperDatabase and hyper_database",
        lambda p: HyperIOManager(database=_db(p), hyper_database=_db(p)),
        ("database=", "hyper_database=", "give one"),
    ),
    (
        "a local path and home_settings",
        lambda p: HyperIOManager(
            database=str(p / "shop.hyper"), home_settings=HomeSettings(lease_seconds=5)
        ),
        ("shop.hyper' is a local path", "home_settings=HomeSettings(lease_seconds=...)", "URI"),
    ),
    (
        "a HyperDatabase of a local path and settings",
        lambda p: HyperDatabase(
            database=str(p / "shop.hyper"),
            settings=HomeSettings(working_dir=str(p), s3=S3Settings()),
        ),
        ("is a local path", "settings=HomeSettings(s3=..., working_dir=...)", "Remove settings"),
    ),
    (
        "an s3:// home and azure settings",
        lambda p: HyperIOManager(
            database="s3://bucket/shop.hyper", home_settings=HomeSettings(azure=AzureSettings())
        ),
        ("s3://bucket/shop.hyper is a s3:// store", "azure=...", "remove them"),
    ),
    (
        "an az:// home and s3 settings",
        lambda p: HyperDatabase(
            database="az://container/shop.hyper", settings=HomeSettings(s3=S3Settings())
        ),
        ("az://container/shop.hyper is a az:// store", "s3=...", "remove them"),
    ),
    (
        "a file:// home and s3 settings",
        lambda p: HyperIOManager(
            database=(p / "shop.hyper").as_uri(), home_settings=HomeSettings(s3=S3Settings())
        ),
        ("is a file:// store", "s3=...", "remove them"),
    ),
    (
        "staging_mode='stream' and a remote staging_dir",
        lambda p: HyperIOManager(
            database=str(p / "shop.hyper"),
            staging_mode="stream",
            staging_dir="s3://bucket/staging",
            staging_s3=S3Staging(region="eu-west-1"),
        ),
        ("staging_mode='stream'", "staging_dir='s3://bucket/staging'", "Leave staging_dir"),
    ),
    (
        "staging_s3 and a local staging_dir",
        lambda p: HyperIOManager(
            database=str(p / "shop.hyper"), staging_dir=str(p), staging_s3=S3Staging()
        ),
        ("staging_s3", "staging_dir"),
    ),
    (
        "log_dir in hyperd parameters",
        lambda p: HyperResource(log_dir=str(p), parameters={"log_dir": str(p / "other")}),
        ("parameters holding 'log_dir'", "log_dir=", "leave them out of parameters"),
    ),
    (
        "default_database_version in hyperd parameters",
        lambda p: HyperIOManager(
            database=str(p / "shop.hyper"),
            hyper=HyperResource(parameters={"default_database_version": "4"}),
        ),
        ("parameters holding 'default_database_version'", "default_database_version="),
    ),
]


@pytest.mark.parametrize(("build", "names"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_settings_that_would_be_ignored_are_refused_naming_both(
    tmp_path: Path, build: Callable[[Path], object], names: tuple[str, ...]
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        build(tmp_path)
    message = str(refused.value)
    assert all(name in message for name in names), message
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing created


def test_settings_at_their_defaults_are_not_given(tmp_path: Path) -> None:
    """Dagster passes nested settings back at their defaults when it builds a resource for
    a run, so defaults beside a HyperDatabase, or for a local path, are no conflict."""
    db = _db(tmp_path)
    manager = HyperIOManager(hyper_database=db, hyper=HyperResource(), home_settings=HomeSettings())
    assert manager.home is db
    local = HyperIOManager(database=str(tmp_path / "shop.hyper"), home_settings=HomeSettings())
    assert local.home.local_path == tmp_path / "shop.hyper"


def _sales() -> pa.Table:
    return pa.table({"id": [1, 2, 3]})


sales = asset(name="sales")(_sales)


def test_a_database_from_an_envvar_is_checked_when_the_run_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its value is known only in the run: the resource's setup refuses it, before the
    step writes."""
    monkeypatch.setenv("SHOP_DATABASE", str(tmp_path / "shop.hyper"))
    io_manager = HyperIOManager(
        database=EnvVar("SHOP_DATABASE"),
        home_settings=HomeSettings(working_dir=str(tmp_path / "copy")),
    )
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [sales], resources={"io_manager": io_manager}, instance=instance, raise_on_error=False
        )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_failure]
    said = json.dumps(str(failure.event_specific_data))
    assert "is a local path" in said and "home_settings=HomeSettings(working_dir=...)" in said
    assert not (tmp_path / "shop.hyper").exists()


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    """moto's S3 server on loopback, with the bucket of these tests."""
    with moto_server() as (host, port):
        endpoint = f"http://{host}:{port}"
        boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="t", aws_secret_access_key="x",
        ).create_bucket(Bucket="settings-bucket")  # fmt: skip
        yield endpoint


def _secret_in_config_schema(resource: type, *path: str) -> bool:
    """Whether Dagster's config schema of `resource` marks the field at `path` secret."""
    field = resource.to_config_schema().as_field()  # type: ignore[attr-defined]
    for name in path:
        config = field.config_type
        while not hasattr(config, "fields"):
            config = config.inner_type  # Noneable
        field = config.fields[name]
    return field.is_secret


@pytest.mark.parametrize("spelling", ["home_settings.s3", "staging_s3"])
def test_the_s3_secret_is_marked_read_from_its_envvar_and_shown_nowhere(
    spelling: str,
    moto: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    records: list[logging.LogRecord],
) -> None:
    """`S3Staging` is `S3Settings`: one model, its secrets marked secret for Dagster in
    each place it is used, and out of every repr, str, log record and run record."""
    assert S3Staging is S3Settings
    for field in ("secret_access_key", "session_token"):
        path = [*spelling.split("."), field]
        assert _secret_in_config_schema(HyperIOManager, *path), path
    for field in ("access_key_id", "region", "endpoint_url"):
        assert not _secret_in_config_schema(HyperIOManager, *spelling.split("."), field)

    monkeypatch.setenv("SETTINGS_S3_SECRET", SECRET)
    s3 = S3Settings(
        endpoint_url=moto,
        region="us-east-1",
        access_key_id="t",
        secret_access_key=EnvVar("SETTINGS_S3_SECRET"),
        session_token=SECRET,  # given as a plain value, still never shown
    )
    if spelling == "staging_s3":
        io_manager = HyperIOManager(
            database=str(tmp_path / "shop.hyper"),
            staging_dir="s3://settings-bucket/staging",
            staging_s3=s3,
        )
    else:
        io_manager = HyperIOManager(
            database="s3://settings-bucket/shop.hyper",
            home_settings=HomeSettings(working_dir=str(tmp_path / "copy"), s3=s3),
        )
    for shown in (repr(s3), str(s3), repr(io_manager), str(io_manager)):
        assert SECRET not in shown
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [sales], resources={"io_manager": io_manager}, instance=instance, raise_on_error=False
        )
        kept = [str(r) for r in instance.all_logs(result.run_id)]
        run = instance.get_run_by_id(result.run_id)
        assert run is not None
        kept.append(json.dumps(run.run_config, default=str))
    assert result.success
    kept += [r.getMessage() for r in records]
    assert kept and not [text for text in kept if SECRET in text]


def test_the_staging_secret_is_read_from_its_envvar(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a run, an EnvVar is read as its value, never passed on as its name."""
    monkeypatch.delenv("SETTINGS_UNSET_SECRET", raising=False)
    s3 = S3Staging(
        endpoint_url="http://127.0.0.1:9", secret_access_key=EnvVar("SETTINGS_UNSET_SECRET")
    )
    area = StagingArea("s3://settings-bucket/x", s3)
    assert area.remote is not None
    with pytest.raises(ConfigurationError, match="SETTINGS_UNSET_SECRET"):
        area.remote.connect()


def test_an_s3_endpoint_without_its_scheme_is_refused_in_either_spelling() -> None:
    for settings in (S3Settings, S3Staging):
        with pytest.raises(ConfigurationError, match="'minio:9000' needs its scheme"):
            settings(endpoint_url="minio:9000")


#: The resource's public defaults, as they were before they were said once.
TABLEAU_DEFAULTS = {
    "site": "",
    "api_version": None,
    "project_match_case": False,
    "verify_tls": True,
    "connect_timeout_seconds": 10.0,
    "timeout_seconds": 300.0,
    "upload_chunk_bytes": 50 * 1024 * 1024,
    "publish_as_job_bytes": 64 * 1024 * 1024,
    "max_retries": 5,
    "retry_initial_delay_seconds": 0.5,
    "retry_max_delay_seconds": 30.0,
    "retry_max_total_seconds": 300.0,
    "job_poll_initial_seconds": 0.5,
    "job_poll_max_seconds": 30.0,
    "job_timeout_seconds": 3600.0,
}
URL = "https://tableau.example.com"


def test_tableau_defaults_are_the_same_in_every_spelling(monkeypatch: pytest.MonkeyPatch) -> None:
    """The resource, the frozen settings, the transport and the component's YAML, each
    built from its defaults alone, configure the same client."""
    fields = TableauServerResource.model_fields
    assert {name: fields[name].default for name in TABLEAU_DEFAULTS} == TABLEAU_DEFAULTS

    resource = TableauServerResource(server_url=URL, sign_in=TokenSignIn(name="ci", secret="s"))
    by_hand = ClientSettings(http=HttpSettings(URL), sign_in=TokenCredentials("ci", "s"))
    assert resource.settings() == by_hand
    assert by_hand.retry == RetryPolicy()

    transport = Transport(by_hand.http, by_hand.retry)
    try:
        timeout = TABLEAU_DEFAULTS["timeout_seconds"]
        connect = TABLEAU_DEFAULTS["connect_timeout_seconds"]
        assert transport.http.timeout == httpx.Timeout(timeout, connect=connect)
        assert transport.policy == RetryPolicy(5, 0.5, 30.0, 300.0)
    finally:
        transport.close()

    monkeypatch.setenv("SETTINGS_TABLEAU_SECRET", "s")
    server = {"server_url": URL, "sign_in": {"name": "ci", "secret_env": "SETTINGS_TABLEAU_SECRET"}}
    component = HyperExtractComponent.from_attributes_dict(
        attributes={
            "tables": [{"name": "a", "source": {"format": "csv", "path": "a.csv"}}],
            "publish": {"datasource": "Shop", "server": server},
        }
    )
    defs = component.build_defs(ComponentTree.for_test().load_context)
    from_yaml = defs.resources["tableau"]
    assert isinstance(from_yaml, TableauServerResource)
    assert from_yaml.settings() == by_hand
