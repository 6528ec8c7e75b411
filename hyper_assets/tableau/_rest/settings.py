"""What a `TableauClient` needs, as frozen values: the server, the sign-in, the limits.

`TableauServerResource` builds these from its Dagster config (secrets read by then); a
script may build them directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hyper_assets.tableau._rest import defaults
from hyper_assets.tableau._rest.connected_app import PUBLISH_SCOPES, connected_app_jwt
from hyper_assets.tableau._rest.transport import HttpSettings, RetryPolicy


@dataclass(frozen=True)
class TokenCredentials:
    """A personal access token."""

    name: str
    secret: str = field(repr=False)

    @property
    def who(self) -> str:
        return f"token {self.name!r}"

    def credentials(self) -> dict[str, Any]:
        return {"personalAccessTokenName": self.name, "personalAccessTokenSecret": self.secret}


@dataclass(frozen=True)
class ConnectedAppCredentials:
    """A Connected App (direct trust): each sign-in presents a fresh JWT."""

    client_id: str
    secret_id: str
    secret_value: str = field(repr=False)
    username: str
    scopes: Sequence[str] = PUBLISH_SCOPES

    @property
    def who(self) -> str:
        return f"connected app {self.client_id!r} as {self.username!r}"

    def credentials(self) -> dict[str, Any]:
        jwt = connected_app_jwt(
            self.client_id, self.secret_id, self.secret_value, self.username, self.scopes
        )
        return {"jwt": jwt}


SignIn = TokenCredentials | ConnectedAppCredentials


@dataclass(frozen=True)
class ClientSettings:
    """Everything a `TableauClient` is configured with; see `TableauServerResource`'s
    fields for what each means (the defaults are `hyper_assets.tableau._rest.defaults`)."""

    http: HttpSettings
    sign_in: SignIn
    site: str = defaults.SITE
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    api_version: str | None = defaults.API_VERSION
    project_match_case: bool = defaults.PROJECT_MATCH_CASE
    upload_chunk_bytes: int = defaults.UPLOAD_CHUNK_BYTES
    publish_as_job_bytes: int = defaults.PUBLISH_AS_JOB_BYTES
    job_poll_initial_seconds: float = defaults.JOB_POLL_INITIAL_SECONDS
    job_poll_max_seconds: float = defaults.JOB_POLL_MAX_SECONDS
    job_timeout_seconds: float = defaults.JOB_TIMEOUT_SECONDS

    def asking_also(self, scopes: Sequence[str]) -> ClientSettings:
        """These settings, a Connected App's JWT also asking for `scopes` (a personal
        access token has no scopes: its settings are these)."""
        sign_in = self.sign_in
        if not isinstance(sign_in, ConnectedAppCredentials):
            return self
        added = tuple(s for s in scopes if s not in sign_in.scopes)
        return replace(self, sign_in=replace(sign_in, scopes=(*sign_in.scopes, *added)))
