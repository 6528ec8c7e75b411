"""The object stores an extract's home can live in, and how each is reached.

A home's URI is parsed once into a frozen description of its store, one class per store
told apart by `scheme` (`S3Home`, `AzureHome`, `LocalHome`), whose `connect` builds the
obstore store. Credentials come from the home's settings (`S3Settings`, `AzureSettings`,
of `hyper_assets._base.store_settings`; give secrets as `dagster.EnvVar`), and where a field is
unset from the store's standard environment (`AWS_*` as boto3 reads it,
`AZURE_STORAGE_*`). They are passed to obstore
only: never logged, never written to the store, never quoted in an error.

The home needs two conditional writes (`put`): create-if-absent (the commit's manifest,
a new lease) and update-if-unchanged (taking over and renewing the lease). S3 and Azure
do both natively (`If-None-Match: *`, `If-Match`). On a local directory obstore creates
if absent (a hard link) but has no conditional update: `put` compares the ETag and
replaces the object under an exclusive `flock` on the home's directory, which every
process on this machine honours (a shared network file system is not served).

Google Cloud Storage is not served: no emulator installable here answers obstore's
requests with generation preconditions, so it could not be tested (see
docs/deployment.md); a gs:// URI is an `UnsupportedHomeError`.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlparse

import obstore
from dagster import Config
from obstore.exceptions import PreconditionError
from obstore.store import AzureStore, LocalStore, ObjectStore, S3Store
from pydantic import Field

from hyper_assets._base.env import plain
from hyper_assets._base.store_settings import AzureSettings, S3Settings, checked_endpoint
from hyper_assets._home.generations import store_errors
from hyper_assets.errors import ConfigurationError, HomeStoreError, UnsupportedHomeError

if TYPE_CHECKING:
    from obstore import PutMode, PutResult
    from obstore.store import ClientConfig

#: Where S3 clients read a custom endpoint (MinIO, moto, LocalStack), in their order.
_S3_ENDPOINTS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")
#: Where Azure clients read a custom endpoint (Azurite), in their order.
_AZURE_ENDPOINTS = ("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT")


class StoreCredentials(Config):
    """How to reach the home's store: the settings of its kind, if any."""

    s3: S3Settings | None = Field(
        default=None, description="For an s3:// home (default: the AWS environment)."
    )
    azure: AzureSettings | None = Field(
        default=None,
        description="For an az:// or abfss:// home (default: the AZURE_STORAGE_* environment).",
    )
    request_timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        description="How long one request to the store may take before it fails "
        "(default: the store client's, 30 s).",
    )

    def client_options(self, endpoint: str | None) -> ClientConfig:
        """obstore's client options: plain HTTP to an http:// endpoint, and the timeout."""
        options: ClientConfig = {"allow_http": (endpoint or "").startswith("http://")}
        if self.request_timeout_seconds:
            options["timeout"] = timedelta(seconds=self.request_timeout_seconds)
        return options


@dataclass(frozen=True)
class S3Home:
    """An S3 (or S3-compatible) home: objects under `prefix` in `bucket`."""

    uri: str
    bucket: str
    prefix: str
    scheme: Literal["s3"] = "s3"

    @property
    def name(self) -> str:
        return self.prefix.rsplit("/", 1)[-1]

    def connect(self, credentials: StoreCredentials | None = None) -> ObjectStore:
        """The store; nothing is sent yet."""
        settings = credentials_for(credentials, self)
        given = settings.s3 or S3Settings()
        endpoint = plain(given.endpoint_url, "s3.endpoint_url") or _first_set(_S3_ENDPOINTS)
        options = {
            "endpoint": checked_endpoint(endpoint) if endpoint else None,
            "region": plain(given.region, "s3.region"),
            "access_key_id": plain(given.access_key_id, "s3.access_key_id"),
            "secret_access_key": plain(given.secret_access_key, "s3.secret_access_key"),
            "token": plain(given.session_token, "s3.session_token"),
        }
        with store_errors(self.uri):
            return S3Store(
                self.bucket,
                prefix=self.prefix,
                client_options=settings.client_options(endpoint),
                # obstore types each option as its own keyword; unset ones are left out
                **{k: v for k, v in options.items() if v},  # type: ignore[arg-type]
            )


@dataclass(frozen=True)
class AzureHome:
    """An Azure Blob Storage (or ADLS Gen2) home: objects under `prefix` in `container`
    of `account` (None: from the settings or the environment)."""

    uri: str
    container: str
    account: str | None
    prefix: str
    scheme: Literal["az"] = "az"

    @property
    def name(self) -> str:
        return self.prefix.rsplit("/", 1)[-1]

    def connect(self, credentials: StoreCredentials | None = None) -> ObjectStore:
        """The store; nothing is sent yet."""
        settings = credentials_for(credentials, self)
        given = settings.azure or AzureSettings()
        endpoint = plain(given.endpoint, "azure.endpoint") or _first_set(_AZURE_ENDPOINTS)
        options = {
            "account_name": self.account or plain(given.account_name, "azure.account_name"),
            "account_key": plain(given.account_key, "azure.account_key"),
            "sas_key": plain(given.sas_token, "azure.sas_token"),
            "endpoint": endpoint,
        }
        with store_errors(self.uri):
            return AzureStore(
                self.container,
                prefix=self.prefix,
                client_options=settings.client_options(endpoint),
                # obstore types each option as its own keyword; unset ones are left out
                **{k: v for k, v in options.items() if v},  # type: ignore[arg-type]
            )


@dataclass(frozen=True)
class LocalHome:
    """A home in a directory of this machine (`file:///path/shop.hyper`): the same
    generations and lease as in a bucket, for tests and single-machine deployments."""

    uri: str
    root: Path
    scheme: Literal["file"] = "file"

    @property
    def name(self) -> str:
        return self.root.name

    def connect(self, credentials: StoreCredentials | None = None) -> ObjectStore:
        """The store (its directory is created if missing)."""
        credentials_for(credentials, self)
        with store_errors(self.uri):
            return LocalStore(self.root, mkdir=True)


StoreHome = S3Home | AzureHome | LocalHome

#: The stores served, by the schemes users write (s3a is Hadoop's name for s3).
SERVED = ("s3", "s3a", "az", "abfss", "file")


def parse_store(database: str, scheme: str) -> StoreHome:
    """The home that URI `database` (of `scheme`, lower case) names; `UnsupportedHomeError`
    for a store not served or a URI that holds credentials or options (the errors quote
    it without them: a user, a key or a SAS token may stand there)."""
    parsed = urlparse(database)
    user, at, host = parsed.netloc.rpartition("@")
    hidden = at and (":" in user or scheme != "abfss")
    if hidden or parsed.query or parsed.fragment:
        netloc = f"…@{host}" if hidden else parsed.netloc
        shown = parsed._replace(netloc=netloc, query="…" * bool(parsed.query), fragment="")
        database = shown.geturl()
    if scheme not in SERVED:
        untested = " (not tested against any emulator here, so not served)" * (scheme == "gs")
        raise UnsupportedHomeError(
            f"database={database!r} names a {scheme}:// store, which HyperIOManager cannot "
            f"keep the file in{untested} (it serves {', '.join(f'{s}://' for s in SERVED)} "
            "and local paths); it is not taken as a local path, where every write would "
            "die with the container. Give a URI of a served store or a path on a disk "
            "every run reaches ('./' before a file name that holds a colon)."
        )
    prefix = parsed.path.strip("/")
    if ":" in user or (at and scheme != "abfss") or parsed.query or parsed.fragment:
        raise UnsupportedHomeError(
            f"database={database!r}: give credentials and options through the home's "
            "settings (HomeSettings(s3=..., azure=...)) or the store's environment "
            "(AWS_ACCESS_KEY_ID, AZURE_STORAGE_ACCOUNT_KEY, ...), not in the URI."
        )
    if scheme == "file":
        if parsed.netloc not in ("", "localhost") or not prefix:
            raise UnsupportedHomeError(
                f"database={database!r}: a file:// home is an absolute path on this "
                "machine: file:///path/extract.hyper."
            )
        return LocalHome(f"file:///{prefix}", Path("/", prefix))
    if scheme == "abfss":
        if not (user and host and prefix):
            raise UnsupportedHomeError(
                f"database={database!r} needs a container, an account and a file name: "
                "abfss://container@account.dfs.core.windows.net/path/extract.hyper."
            )
        return AzureHome(f"abfss://{parsed.netloc}/{prefix}", user, host.split(".")[0], prefix)
    if not parsed.netloc or not prefix:
        container = "container" if scheme == "az" else "bucket"
        raise UnsupportedHomeError(
            f"database={database!r} needs a {container} and a file name: "
            f"{scheme}://{container}/path/extract.hyper."
        )
    if scheme == "az":
        return AzureHome(f"az://{parsed.netloc}/{prefix}", parsed.netloc, None, prefix)
    return S3Home(f"s3://{parsed.netloc}/{prefix}", parsed.netloc, prefix)


def put(store: ObjectStore, key: str, body: bytes, mode: PutMode) -> PutResult:
    """Writes `key` only if absent (`"create"`) or only if its ETag still is
    `mode["e_tag"]`; `AlreadyExistsError` / `PreconditionError` otherwise, and
    `HomeStoreError` when a local home's directory cannot be locked. Returns the written
    object's `e_tag`."""
    if isinstance(mode, str) or not isinstance(store, LocalStore):
        return obstore.put(store, key, body, mode=mode)
    root = Path(store.prefix or "/")
    try:
        directory = os.open(root, os.O_RDONLY)
    except OSError as error:  # unreadable for this user, or removed
        raise HomeStoreError(
            f"The home's directory {str(root)!r} cannot be opened to lock it "
            f"({error.strerror}): each writer locks it to update the home's lease. It must "
            "exist, and this process's user needs read, write and search permission on it."
        ) from error
    try:
        fcntl.flock(directory, fcntl.LOCK_EX)  # released when closed
        try:
            current = obstore.head(store, key)["e_tag"]
        except FileNotFoundError:
            current = None
        if current != mode.get("e_tag"):
            raise PreconditionError(f"{key} was changed or deleted since it was read")
        return obstore.put(store, key, body)
    finally:
        os.close(directory)


def credentials_for(credentials: StoreCredentials | None, home: StoreHome) -> StoreCredentials:
    """`credentials`, checked to hold no settings for another kind of store (which it
    would ignore)."""
    credentials = credentials or StoreCredentials()
    stray = [
        kind
        for kind, given in (("s3", credentials.s3), ("azure", credentials.azure))
        if given is not None and kind != {"s3": "s3", "az": "azure"}.get(home.scheme)
    ]
    if stray:
        raise ConfigurationError(
            f"The home {home.uri} is a {home.scheme}:// store, but its settings give "
            f"{' and '.join(stray)}=...: remove them, or give the URI of that store."
        )
    return credentials


def _first_set(variables: tuple[str, ...]) -> str | None:
    return next((os.environ[v] for v in variables if os.environ.get(v)), None)
