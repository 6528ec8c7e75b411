"""The stores a home can live in, each against a real server on loopback: moto's S3 server,
Azurite's blob service (Azure), and a local directory (file://). The same conditional
writes, generations, lease and Dagster runs on each; credentials from dagster.EnvVar that
reach the store and nothing else."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

import boto3
import obstore
import pyarrow as pa
import pytest
from dagster import DagsterInstance, EnvVar, asset, materialize
from helpers import contents, query
from object_stores import (
    AZURITE_ACCOUNT,
    AZURITE_KEY,
    azurite,
    azurite_version,
    create_container,
    moto_server,
)
from obstore.exceptions import AlreadyExistsError, PreconditionError

from hyper_assets import HyperIOManager, UnsupportedHomeError
from hyper_assets._home.chunks import CHUNK_SIZE, Transfer
from hyper_assets._home.generations import Generations, WorkingCopy
from hyper_assets._home.home import HomeSettings, HyperDatabase, parse_home
from hyper_assets._home.lease import Lease
from hyper_assets._home.stores import (
    AzureHome,
    AzureSettings,
    LocalHome,
    S3Home,
    S3Settings,
    StoreHome,
    put,
)
from hyper_assets.errors import (
    ConfigurationError,
    CorruptFileError,
    HomeConflictError,
    HomeStoreError,
    LeaseLostError,
)

SECRET = "not-a-real-secret-5f3c9a"


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    with moto_server() as (host, port):
        yield f"http://{host}:{port}"


@pytest.fixture(scope="module")
def azurite_endpoint(tmp_path_factory) -> Iterator[str]:
    if azurite_version() is None:
        pytest.skip("Azurite is not installed (make azurite, or npm install -g azurite@3.35.0)")
    with azurite(tmp_path_factory.mktemp("azurite")) as endpoint:
        yield endpoint


@pytest.fixture(params=["s3", "azure", "file"])
def home_uri(request, monkeypatch, tmp_path) -> str:
    """A new home in each store, reached through the store's standard environment."""
    name = f"home-{uuid.uuid4().hex[:12]}"
    if request.param == "s3":
        endpoint = request.getfixturevalue("moto_endpoint")
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=name)
        return f"s3://{name}/extracts/shop.hyper"
    if request.param == "azure":
        endpoint = request.getfixturevalue("azurite_endpoint")
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", AZURITE_ACCOUNT)
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY)
        monkeypatch.setenv("AZURE_STORAGE_ENDPOINT", endpoint)
        create_container(endpoint, name)
        return f"az://{name}/extracts/shop.hyper"
    return (tmp_path / "store" / "shop.hyper").as_uri()


def home_of(uri: str) -> StoreHome:
    home = parse_home(uri)
    assert isinstance(home, StoreHome)
    return home


def working_copy(directory: Path, body: bytes) -> WorkingCopy:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "shop.hyper").write_bytes(body)
    return WorkingCopy(directory, "shop.hyper")


# --- what a URI names ------------------------------------------------------------------------


def test_each_served_scheme_names_its_store():
    assert parse_home("az://team/x/shop.hyper") == AzureHome(
        "az://team/x/shop.hyper", "team", None, "x/shop.hyper"
    )
    assert parse_home("abfss://team@acct.dfs.core.windows.net/x/shop.hyper") == AzureHome(
        "abfss://team@acct.dfs.core.windows.net/x/shop.hyper", "team", "acct", "x/shop.hyper"
    )
    assert parse_home("file:///srv/x/shop.hyper") == LocalHome(
        "file:///srv/x/shop.hyper", Path("/srv/x/shop.hyper")
    )
    assert parse_home("S3://b/shop.hyper") == S3Home("s3://b/shop.hyper", "b", "shop.hyper")


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("gs://b/x.hyper", "not tested against any emulator"),
        ("hdfs://nn/x.hyper", "cannot keep the file in"),
        ("abfss://c:key@a.dfs.core.windows.net/x.hyper", "not in the URI"),
        ("az://user@c/x.hyper", "not in the URI"),
        ("abfss://a.dfs.core.windows.net/x.hyper", "needs a container, an account"),
        ("az://c", "needs a container and a file name"),
        ("file://host/x.hyper", "absolute path on this machine"),
        ("file:///", "absolute path on this machine"),
    ],
)
def test_a_uri_the_library_cannot_serve_is_refused_at_definition(uri, says, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedHomeError, match=says):
        HyperIOManager(database=uri)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "uri",
    [
        f"s3://AKIA:{SECRET}@b/x.hyper",
        f"s3://{SECRET}@b/x.hyper",
        f"gs://key:{SECRET}@b/x.hyper",
        f"abfss://c:{SECRET}@a.dfs.core.windows.net/x.hyper",
        f"az://c/x.hyper?sv=2024&sig={SECRET}",
    ],
)
def test_a_secret_in_a_uri_is_refused_and_not_quoted(uri):
    with pytest.raises(UnsupportedHomeError) as refused:
        HyperIOManager(database=uri)
    assert SECRET not in str(refused.value) and "…" in str(refused.value)


def test_settings_for_another_store_are_refused(tmp_path):
    home = home_of((tmp_path / "shop.hyper").as_uri())
    with pytest.raises(ConfigurationError, match=r"settings give s3=\.\.\."):
        home.connect(HomeSettings(s3=S3Settings(region="eu-west-1")))
    with pytest.raises(ConfigurationError, match=r"give azure=\.\.\."):
        home_of("s3://b/shop.hyper").connect(HomeSettings(azure=AzureSettings()))


# --- the conditional writes, generations and lease on each store -----------------------------


def test_the_store_creates_only_if_absent_and_updates_only_if_unchanged(home_uri):
    store = home_of(home_uri).connect()
    first = put(store, "lease.json", b"one", "create")
    with pytest.raises(AlreadyExistsError):
        put(store, "lease.json", b"two", "create")
    second = put(store, "lease.json", b"two", {"e_tag": first["e_tag"]})
    with pytest.raises(PreconditionError):
        put(store, "lease.json", b"stale", {"e_tag": first["e_tag"]})
    assert bytes(obstore.get(store, "lease.json").bytes()) == b"two"
    assert obstore.head(store, "lease.json")["e_tag"] == second["e_tag"] != first["e_tag"]


def test_of_racing_updates_of_a_local_object_exactly_one_wins(tmp_path):
    """The conditional update this library adds to a local directory (obstore has none):
    eight writers that read the same ETag race; one replaces the object."""
    store = home_of((tmp_path / "shop.hyper").as_uri()).connect()
    seen = put(store, "lease.json", b"first", "create")["e_tag"]
    barrier = threading.Barrier(8)

    def update(n: int) -> bool:
        barrier.wait()
        try:
            put(store, "lease.json", f"writer {n}".encode(), {"e_tag": seen})
        except PreconditionError:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        won = [n for n, ok in enumerate(pool.map(update, range(8))) if ok]
    assert len(won) == 1
    assert bytes(obstore.get(store, "lease.json").bytes()) == f"writer {won[0]}".encode()


# A lease of a local home, taken by a process whose user may write its directory, not read it.
TAKE_OVER = """
import json, sys
from hyper_assets._home.home import parse_home
from hyper_assets._home.lease import Lease
uri = sys.argv[1]
try:
    Lease(parse_home(uri).connect(), uri, seconds=30, timeout_seconds=1).acquire()
except Exception as error:
    print(json.dumps([type(error).__name__, str(error)]))
"""


def _permission_bits_hold() -> list[str]:
    """The command prefix under which this user's permission bits hold for it: for root,
    util-linux's setpriv without the capabilities that override them."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root ignores permission bits, and setpriv (util-linux) is not installed")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def test_a_local_home_its_user_cannot_lock_is_named_and_the_lease_left_as_it_was(tmp_path):
    uri = (tmp_path / "shop.hyper").as_uri()
    home = home_of(uri)
    assert isinstance(home, LocalHome)
    store = home.connect()
    with Lease(store, uri, seconds=30, timeout_seconds=1):  # taken and released
        pass
    before = bytes(obstore.get(store, "lease.json").bytes())
    directory = home.root  # the home's objects: shop.hyper/lease.json, ...
    directory.chmod(0o333)  # write and search, not read: its files open, it does not
    try:
        done = subprocess.run(
            [*_permission_bits_hold(), sys.executable, "-c", TAKE_OVER, uri],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        directory.chmod(0o755)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout, "the lease was taken over"
    name, message = json.loads(done.stdout.splitlines()[-1])
    assert name == "HomeStoreError", message
    assert f"The home's directory '{directory}' cannot be opened to lock it" in message
    assert "(Permission denied)" in message and "needs read, write and search" in message
    assert bytes(obstore.get(store, "lease.json").bytes()) == before


def test_of_two_commits_from_one_generation_the_second_is_refused(home_uri, tmp_path):
    home = home_of(home_uri)
    generations = Generations(home.connect(), home.uri, home.name)
    base = generations.commit(None, working_copy(tmp_path / "0", b"v1"), "l0")
    first = generations.commit(base, working_copy(tmp_path / "a", b"a"), "la")
    with pytest.raises(HomeConflictError, match="generation 2"):
        generations.commit(base, working_copy(tmp_path / "b", b"b"), "lb")
    assert generations.current() == first
    fresh = WorkingCopy(tmp_path / "c", "shop.hyper")
    (tmp_path / "c").mkdir()
    assert generations.download(generations.current(), fresh)
    assert fresh.database.read_bytes() == b"a"


def test_chunks_moved_several_at_once_arrive_byte_for_byte(home_uri, tmp_path):
    """A file of 41 chunks and a tail, two of its chunks alike, and an outbox file beside
    it, committed 8 chunks at once: each distinct chunk is stored once, under the
    generation's token. Fresh copies downloaded 8 at once and one at a time hold the
    same bytes; after a commit of two changed chunks, a copy one generation behind
    fetches those two only."""
    home = home_of(home_uri)
    store = home.connect()
    generations = Generations(store, home.uri, home.name, concurrency=8)
    twice = os.urandom(CHUNK_SIZE)
    body = bytearray(
        os.urandom(20 * CHUNK_SIZE) + twice + os.urandom(19 * CHUNK_SIZE) + twice + b"tail"
    )
    outbox = os.urandom(3 * CHUNK_SIZE + 7)
    copy = working_copy(tmp_path / "w", bytes(body))
    (copy.directory / "shop.hyper.outbox").mkdir()
    (copy.directory / "shop.hyper.outbox" / "1.json").write_bytes(outbox)
    one = generations.commit(None, copy, "l")
    total = len(body) + len(outbox)
    assert generations.sent == Transfer(moved=total - CHUNK_SIZE, kept=CHUNK_SIZE)
    stored = {m["path"] for batch in obstore.list(store, "chunks/") for m in batch}
    assert stored == one.keys and len(stored) == 45  # 42 + 4 parts, two alike
    assert all(key.endswith(f".{one.token}") for key in stored)

    expected = {"shop.hyper": bytes(body), "shop.hyper.outbox/1.json": outbox}
    for concurrency in (8, 1):
        fresh = WorkingCopy(tmp_path / f"fresh-{concurrency}", "shop.hyper")
        fresh.directory.mkdir()
        at = Generations(store, home.uri, home.name, concurrency)
        assert at.download(one, fresh) == Transfer(moved=total)
        assert contents(fresh) == expected

    body[3 * CHUNK_SIZE] ^= 0xFF
    body[30 * CHUNK_SIZE + 5] ^= 0xFF
    copy.database.write_bytes(bytes(body))
    two = generations.commit(one, copy, "l")
    assert generations.sent == Transfer(moved=2 * CHUNK_SIZE, kept=total - 2 * CHUNK_SIZE)
    behind = WorkingCopy(tmp_path / "fresh-1", "shop.hyper")
    assert generations.download(two, behind) == Transfer(2 * CHUNK_SIZE, total - 2 * CHUNK_SIZE)
    assert contents(behind) == {**expected, "shop.hyper": bytes(body)}


@pytest.mark.parametrize("marked", [True, False], ids=["patched", "checked"])
def test_a_corrupted_chunk_is_refused_by_its_sha256_and_the_copy_keeps_its_bytes(
    home_uri, tmp_path, marked
):
    """One chunk of the current generation overwritten with other bytes of its size: a
    copy one generation behind, downloading 8 chunks at once, is refused with
    `CorruptFileError` naming that chunk, and its file keeps the bytes it held: patched,
    still marked as generation 1; without its marker, checked chunk by chunk into a
    partial file, which is dropped."""
    home = home_of(home_uri)
    store = home.connect()
    generations = Generations(store, home.uri, home.name, concurrency=8)
    first = os.urandom(32 * CHUNK_SIZE)
    copy = working_copy(tmp_path / "w", first)
    one = generations.commit(None, copy, "l")
    behind = WorkingCopy(tmp_path / "behind", "shop.hyper")
    behind.directory.mkdir()
    generations.download(one, behind)
    if not marked:
        behind.changing()  # of unknown content: the full download's path
    second = bytearray(first)
    second[5 * CHUNK_SIZE] ^= 0xFF
    second[25 * CHUNK_SIZE] ^= 0xFF
    copy.database.write_bytes(bytes(second))
    two = generations.commit(one, copy, "l")
    corrupted = two.files[0].parts[25].key
    obstore.put(store, corrupted, os.urandom(CHUNK_SIZE))
    with pytest.raises(CorruptFileError, match=rf"{re.escape(corrupted)} does not hold .*SHA-256"):
        generations.download(two, behind)
    assert behind.database.read_bytes() == first
    assert behind.held() == (one if marked else None)
    assert sorted(p.name for p in behind.directory.iterdir() if p.name != "shop.hyper") == [
        ".generation.digests.json",
        *([".generation.json"] if marked else []),
        ".generation.manifest.json",
    ]


def test_the_lease_takes_turns_expires_and_fences(home_uri):
    store = home_of(home_uri).connect()
    stalled = Lease(store, home_uri, seconds=1, timeout_seconds=5)
    stalled.acquire()  # no heartbeat: as a killed or stalled writer
    # Its own seconds long: it waits out the stalled lease's 1 s, and its renew() below
    # must not find it expired on a loaded machine.
    waiter = Lease(store, home_uri, seconds=60, timeout_seconds=5)
    waiter.acquire()  # taken over once unchanged for its seconds
    with pytest.raises(LeaseLostError, match="expired"):
        stalled.renew()
    stalled.release()  # not its own any more: leaves the waiter's lease alone
    waiter.renew()
    waiter.release()
    with Lease(store, home_uri, seconds=30, timeout_seconds=1):  # released: taken at once
        pass


DAYS = pa.array([date(2024, 1, 1)] * 3)


@asset
def sales() -> pa.Table:
    return pa.table({"day": DAYS, "id": pa.array([1, 2, 3], pa.int64())})


def test_dagster_runs_write_and_read_one_extract_in_each_store(home_uri, tmp_path, hyper):
    for run in ("first", "second"):  # each with a fresh working copy, as a new container
        settings = HomeSettings(working_dir=str(tmp_path / run))
        io_manager = HyperIOManager(database=home_uri, home_settings=settings)
        assert materialize([sales], resources={"io_manager": io_manager}).success
    reader = HyperDatabase(
        database=home_uri, settings=HomeSettings(working_dir=str(tmp_path / "r"))
    )
    with reader.reading() as database:
        rows = 'SELECT CAST(day AS TEXT), id FROM "Extract"."sales" ORDER BY 2'
        assert query(hyper, database, rows) == [["2024-01-01", i] for i in (1, 2, 3)]
    home = home_of(home_uri)
    current = Generations(home.connect(), home.uri, home.name).current()
    assert current is not None and current.number == 2


# --- credentials from dagster.EnvVar ---------------------------------------------------------


def _no_store_environment(monkeypatch) -> None:
    for name in list(os.environ):
        if name.startswith(("AWS_", "AZURE_", "AZURITE_")):
            monkeypatch.delenv(name)


def _everything_dagster_kept(instance: DagsterInstance, run_id: str) -> str:
    records = instance.all_logs(run_id)
    run = instance.get_run_by_id(run_id)
    assert run is not None
    return json.dumps([str(r) for r in records]) + json.dumps(run.run_config, default=str)


def test_explicit_s3_credentials_from_envvar_reach_the_store_and_nothing_else(
    moto_endpoint, monkeypatch, tmp_path, hyper
):
    """No AWS_* variable is set: the endpoint, region and keys come from the settings,
    the secret from an EnvVar. It is in no log, run config, metadata or stored object,
    nor in the error of a failing store."""
    _no_store_environment(monkeypatch)
    monkeypatch.setenv("SHOP_S3_SECRET", SECRET)
    bucket = f"home-{uuid.uuid4().hex[:12]}"
    boto3.client(
        "s3", endpoint_url=moto_endpoint, region_name="us-east-1",
        aws_access_key_id="shop", aws_secret_access_key=SECRET,
    ).create_bucket(Bucket=bucket)  # fmt: skip
    s3 = S3Settings(
        endpoint_url=moto_endpoint,
        region="us-east-1",
        access_key_id="shop",
        secret_access_key=EnvVar("SHOP_S3_SECRET"),
    )
    assert SECRET not in repr(s3) and SECRET not in repr(HomeSettings(s3=s3))

    def run(uri: str, where: str) -> tuple[bool, str]:
        io_manager = HyperIOManager(
            database=uri, home_settings=HomeSettings(working_dir=str(tmp_path / where), s3=s3)
        )
        with DagsterInstance.ephemeral() as instance:
            result = materialize(
                [sales], resources={"io_manager": io_manager}, instance=instance,
                raise_on_error=False,
            )  # fmt: skip
            return result.success, _everything_dagster_kept(instance, result.run_id)

    uri = f"s3://{bucket}/extracts/shop.hyper"
    succeeded, kept = run(uri, "ok")
    assert succeeded and SECRET not in kept
    reader = HyperDatabase(
        database=uri, settings=HomeSettings(working_dir=str(tmp_path / "r"), s3=s3)
    )
    with reader.reading() as database:
        assert query(hyper, database, 'SELECT COUNT(*) FROM "Extract"."sales"') == [[3]]
    client = boto3.client(
        "s3", endpoint_url=moto_endpoint, region_name="us-east-1",
        aws_access_key_id="shop", aws_secret_access_key=SECRET,
    )  # fmt: skip
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]]
    assert "extracts/shop.hyper/lease.json" in keys
    for key in keys:
        assert SECRET.encode() not in client.get_object(Bucket=bucket, Key=key)["Body"].read()

    succeeded, kept = run("s3://no-such-bucket/shop.hyper", "failing")
    assert not succeeded and "HomeStoreError" in kept and SECRET not in kept
    failing = HyperDatabase(
        database="s3://no-such-bucket/shop.hyper",
        settings=HomeSettings(working_dir=str(tmp_path / "failing"), s3=s3),
    )
    with pytest.raises(HomeStoreError) as refused, failing.writing():
        pass
    chain = [refused.value, *_causes(refused.value)]
    assert all(SECRET not in str(e) and SECRET not in repr(e) for e in chain)


def test_explicit_azure_credentials_from_envvar_reach_azurite(
    azurite_endpoint, monkeypatch, tmp_path, hyper
):
    """No AZURE_* variable is set: the account key from an EnvVar signs the requests
    (Azurite checks Shared Key signatures); a wrong key is refused without being quoted."""
    _no_store_environment(monkeypatch)
    container = f"home-{uuid.uuid4().hex[:12]}"
    create_container(azurite_endpoint, container)
    uri = f"abfss://{container}@{AZURITE_ACCOUNT}.dfs.core.windows.net/team/shop.hyper"

    def settings(key_variable: str, where: str) -> HomeSettings:
        azure = AzureSettings(account_key=EnvVar(key_variable), endpoint=azurite_endpoint)
        return HomeSettings(working_dir=str(tmp_path / where), azure=azure)

    monkeypatch.setenv("SHOP_AZURE_KEY", AZURITE_KEY)
    io_manager = HyperIOManager(database=uri, home_settings=settings("SHOP_AZURE_KEY", "w"))
    assert materialize([sales], resources={"io_manager": io_manager}).success
    with HyperDatabase(database=uri, settings=settings("SHOP_AZURE_KEY", "r")).reading() as db:
        assert query(hyper, db, 'SELECT COUNT(*) FROM "Extract"."sales"') == [[3]]

    wrong = base64.b64encode(f"a wrong key, {SECRET}".encode()).decode()
    monkeypatch.setenv("SHOP_WRONG_KEY", wrong)
    unsigned = HyperDatabase(database=uri, settings=settings("SHOP_WRONG_KEY", "x"))
    with pytest.raises(HomeStoreError) as refused, unsigned.reading():
        pass
    chain = [refused.value, *_causes(refused.value)]
    assert all(wrong not in str(e) for e in chain), str(refused.value)
    monkeypatch.delenv("SHOP_WRONG_KEY")
    with pytest.raises(ConfigurationError, match=r"SHOP_WRONG_KEY \(azure.account_key\) is not"):
        unsigned.home.connect(unsigned.settings)


def _causes(error: BaseException) -> list[BaseException]:
    found = []
    while error.__cause__ is not None or error.__context__ is not None:
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
        found.append(error)
    return found
