"""How this process reaches an object store: `S3Settings` and `AzureSettings`, as config.

One model per store, whatever it serves: an extract's home (`HomeSettings(s3=...,
azure=...)`, `hyper_assets._home.stores`) or an s3:// staging_dir (`HyperIOManager(staging_s3=
...)`, where `S3Staging` is `S3Settings` under the name it has there). Secrets are marked
secret and left out of reprs; give them as `dagster.EnvVar`. They are read (`plain`) only
to be passed to the store's client.
"""

from __future__ import annotations

from urllib.parse import urlparse

from dagster import Config, EnvVar
from pydantic import Field, field_validator

from hyper_assets._base.env import secret_field
from hyper_assets.errors import ConfigurationError


class S3Settings(Config):
    """How to reach S3 or an S3-compatible store; an unset field is read as boto3 and the
    AWS CLI read it (the environment, the profile, the machine's role)."""

    endpoint_url: str | None = Field(
        default=None, description="An S3-compatible endpoint, e.g. http://minio:9000."
    )
    region: str | None = Field(default=None, description="The bucket's region.")
    access_key_id: str | None = Field(default=None, description="AWS access key id.")
    secret_access_key: str | None = secret_field(
        "Secret access key: pass dagster.EnvVar(..).", default=None
    )
    session_token: str | None = secret_field(
        "Session token: pass dagster.EnvVar(..).", default=None
    )

    @field_validator("endpoint_url", mode="before")
    @classmethod
    def _endpoint_with_scheme(cls, endpoint: object) -> object:
        # Before pydantic reads an EnvVar as its name; its value is checked where it is read.
        if isinstance(endpoint, str) and not isinstance(endpoint, EnvVar):
            checked_endpoint(endpoint)
        return endpoint


def checked_endpoint(endpoint: str) -> str:
    """`endpoint`, an S3 endpoint URL, refused without its http(s) scheme."""
    if urlparse(endpoint).scheme not in ("http", "https"):
        raise ConfigurationError(
            f"S3 endpoint_url {endpoint!r} needs its scheme: http://host:port or https://host:port."
        )
    return endpoint


class AzureSettings(Config):
    """How to reach an az:// or abfss:// home; an unset field is read from the
    environment (`AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`,
    `AZURE_STORAGE_SAS_TOKEN`, `AZURE_STORAGE_ENDPOINT`, or a managed identity)."""

    account_name: str | None = Field(
        default=None, description="The storage account (an abfss:// URI names it)."
    )
    account_key: str | None = secret_field(
        "The account's key: pass dagster.EnvVar(..).", default=None
    )
    sas_token: str | None = secret_field(
        "A shared access signature: pass dagster.EnvVar(..).", default=None
    )
    endpoint: str | None = Field(
        default=None,
        description="Another blob endpoint than https://<account>.blob.core.windows.net, "
        "e.g. Azurite's http://127.0.0.1:10000/devstoreaccount1.",
    )
