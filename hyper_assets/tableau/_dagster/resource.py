"""`TableauServerResource`: where Tableau is and how to sign in, as Dagster config.

    tableau = TableauServerResource(
        server_url="https://tableau.example.com",
        site="sales",
        sign_in=TokenSignIn(name="ci", secret=dagster.EnvVar("TABLEAU_TOKEN_SECRET")),
    )  # or sign_in=ConnectedAppSignIn(client_id=.., secret_id=.., secret_value=.., username=..)
    with tableau.client() as client:
        ...

The resource only configures: `client()` reads the secrets and hands a `TableauClient`
the frozen `ClientSettings`. In run config the sign-in is one of
`sign_in: {token: {name, secret}}` and `sign_in: {connected_app: {client_id, ...}}`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from dagster import Config, ConfigurableResource
from pydantic import Field

from hyper_assets._base.env import plain, secret_field
from hyper_assets.errors import ConfigurationError
from hyper_assets.tableau._rest import defaults
from hyper_assets.tableau._rest.client import TableauClient
from hyper_assets.tableau._rest.connected_app import PUBLISH_SCOPES
from hyper_assets.tableau._rest.settings import (
    ClientSettings,
    ConnectedAppCredentials,
    SignIn,
    TokenCredentials,
)
from hyper_assets.tableau._rest.transport import HttpSettings, RetryPolicy

#: The flat sign-in fields of earlier versions, and where each went.
_MOVED = {
    "token_name": "sign_in=TokenSignIn(name=...)",
    "token_secret": "sign_in=TokenSignIn(secret=...)",
    "connected_app_client_id": "sign_in=ConnectedAppSignIn(client_id=...)",
    "connected_app_secret_id": "sign_in=ConnectedAppSignIn(secret_id=...)",
    "connected_app_secret_value": "sign_in=ConnectedAppSignIn(secret_value=...)",
    "username": "sign_in=ConnectedAppSignIn(username=...)",
    "scopes": "sign_in=ConnectedAppSignIn(scopes=...)",
}


class TokenSignIn(Config):
    """Sign in with a personal access token."""

    kind: Literal["token"] = Field(default="token", description="This way to sign in.")
    name: str = Field(description="The personal access token's name.")
    secret: str = secret_field("The token's secret (a secret): pass dagster.EnvVar(..).")

    def credentials(self) -> TokenCredentials:
        return TokenCredentials(
            plain(self.name, "the token name"), plain(self.secret, "the token secret")
        )


class ConnectedAppSignIn(Config):
    """Sign in through a Connected App (direct trust) with a fresh JWT each time."""

    kind: Literal["connected_app"] = Field(
        default="connected_app", description="This way to sign in."
    )
    client_id: str = Field(description="The Connected App's client id.")
    secret_id: str = Field(description="The id of one of the app's secrets.")
    secret_value: str = secret_field("That secret's value (a secret): pass dagster.EnvVar(..).")
    username: str = Field(description="The Tableau user the app acts as.")
    scopes: list[str] = Field(
        default_factory=lambda: list(PUBLISH_SCOPES),
        description="What the JWT grants: by default what a publish calls (the copy check "
        "adds tableau:viz_data_service:read to its own sign-in).",
    )

    def credentials(self) -> ConnectedAppCredentials:
        return ConnectedAppCredentials(
            plain(self.client_id, "the connected app's client id"),
            plain(self.secret_id, "the connected app's secret id"),
            plain(self.secret_value, "the connected app's secret value"),
            plain(self.username, "the connected app's username"),
            tuple(self.scopes),
        )


class TableauServerResource(ConfigurableResource):
    """Where Tableau is and how to talk to it; `client()` opens a `TableauClient`."""

    server_url: str = Field(description="Base URL, e.g. https://tableau.example.com.")
    site: str = Field(
        default=defaults.SITE, description='Site content URL; "" is the default site.'
    )
    sign_in: TokenSignIn | ConnectedAppSignIn = Field(
        discriminator="kind",
        description="How to sign in: TokenSignIn (a personal access token) or "
        "ConnectedAppSignIn (a Connected App's JWT).",
    )
    api_version: str | None = Field(
        default=defaults.API_VERSION, description="REST API version. Default: the server's."
    )
    project_match_case: bool = Field(
        default=defaults.PROJECT_MATCH_CASE,
        description="Find projects by their exact letter case only. Default: a name in "
        'another case ("default") finds the project when exactly one matches regardless '
        "of case.",
    )
    verify_tls: bool = Field(
        default=defaults.VERIFY_TLS, description="Verify the server's certificate."
    )
    connect_timeout_seconds: float = Field(
        default=defaults.CONNECT_TIMEOUT_SECONDS,
        description="Seconds to wait for a connection to the server.",
    )
    timeout_seconds: float = Field(
        default=defaults.TIMEOUT_SECONDS, description="Read/write timeout per request."
    )
    upload_chunk_bytes: int = Field(
        default=defaults.UPLOAD_CHUNK_BYTES,
        description="Files are read and uploaded this much at a time.",
    )
    publish_as_job_bytes: int = Field(
        default=defaults.PUBLISH_AS_JOB_BYTES,
        description="Whole-file publishes above this run as a server job (asJob=true), polled "
        "to the end, as Tableau's own client does above 64 MB.",
    )
    max_retries: int = Field(
        default=defaults.MAX_RETRIES, description="Retries per request (0: none)."
    )
    retry_initial_delay_seconds: float = Field(
        default=defaults.RETRY_INITIAL_DELAY_SECONDS,
        description="Delay before the first retry; doubled per retry, jittered.",
    )
    retry_max_delay_seconds: float = Field(
        default=defaults.RETRY_MAX_DELAY_SECONDS, description="Longest delay of a retry."
    )
    retry_max_total_seconds: float = Field(
        default=defaults.RETRY_MAX_TOTAL_SECONDS, description="Retry budget per request."
    )
    job_poll_initial_seconds: float = Field(
        default=defaults.JOB_POLL_INITIAL_SECONDS,
        description="Delay before polling a job again; x1.5 per poll.",
    )
    job_poll_max_seconds: float = Field(
        default=defaults.JOB_POLL_MAX_SECONDS, description="Longest delay between polls."
    )
    job_timeout_seconds: float = Field(
        default=defaults.JOB_TIMEOUT_SECONDS,
        description="Give up waiting for a job after this long.",
    )

    def __init__(self, **data: Any) -> None:
        _check_sign_in(data)
        super().__init__(**data)

    def settings(self) -> ClientSettings:
        """The frozen settings a `TableauClient` takes, the secrets read."""
        sign_in: SignIn = self.sign_in.credentials()
        return ClientSettings(
            http=HttpSettings(
                self.server_url, self.verify_tls, self.connect_timeout_seconds, self.timeout_seconds
            ),
            sign_in=sign_in,
            site=self.site,
            retry=RetryPolicy(
                self.max_retries,
                self.retry_initial_delay_seconds,
                self.retry_max_delay_seconds,
                self.retry_max_total_seconds,
            ),
            api_version=self.api_version,
            project_match_case=self.project_match_case,
            upload_chunk_bytes=self.upload_chunk_bytes,
            publish_as_job_bytes=self.publish_as_job_bytes,
            job_poll_initial_seconds=self.job_poll_initial_seconds,
            job_poll_max_seconds=self.job_poll_max_seconds,
            job_timeout_seconds=self.job_timeout_seconds,
        )

    def client(self, *, also_scopes: Sequence[str] = ()) -> TableauClient:
        """A new client; use it as a context manager so it signs out and closes. A
        Connected App's JWT also asks for `also_scopes` (the copy check's VDS scope)."""
        return TableauClient(self.settings().asking_also(also_scopes))


#: `sign_in` as Dagster's run config gives it: the way to sign in, then its fields.
_SIGN_INS = {"token": TokenSignIn, "connected_app": ConnectedAppSignIn}


def _check_sign_in(data: dict[str, Any]) -> None:
    """`ConfigurationError` saying what to pass, for the old flat sign-in fields and for a
    `sign_in` missing or of another type (without showing any value: it may be a secret)."""
    old = [name for name in _MOVED if name in data]
    if old:
        moved = "; ".join(f"{name} -> {_MOVED[name]}" for name in old)
        raise ConfigurationError(
            f"TableauServerResource signs in through one field now, sign_in: {moved} "
            "(TokenSignIn and ConnectedAppSignIn are in hyper_assets)."
        )
    sign_in = data.get("sign_in")
    if isinstance(sign_in, tuple(_SIGN_INS.values())):
        return
    if isinstance(sign_in, dict) and len(sign_in) == 1:
        ((kind, fields),) = sign_in.items()
        if kind in _SIGN_INS and isinstance(fields, dict):
            return
    found = (
        "is missing"
        if sign_in is None
        else f"is a dict with keys {sorted(map(str, sign_in))}"
        if isinstance(sign_in, dict)
        else f"is the class {sign_in.__name__}, not an instance"
        if isinstance(sign_in, type)
        else f"is a {type(sign_in).__name__}"
    )
    raise ConfigurationError(
        f"TableauServerResource's sign_in {found}; pass "
        "sign_in=TokenSignIn(name=..., secret=dagster.EnvVar(...)) or sign_in=ConnectedAppSignIn("
        "client_id=..., secret_id=..., secret_value=dagster.EnvVar(...), username=...), both "
        "from hyper_assets."
    )
