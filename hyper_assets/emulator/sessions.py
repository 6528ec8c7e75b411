"""Personal access tokens and the sessions signed in with them, each bound to one site."""

from __future__ import annotations

import secrets
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from hyper_assets.errors import RestApiError


@dataclass(frozen=True)
class Session:
    token: str
    token_name: str
    user_id: str
    site_id: str


class Sessions:
    """Checks PAT sign-ins; one live session per token name, as on Tableau Server."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self.tokens = dict(tokens)
        self._live: dict[str, Session] = {}
        self._lock = threading.Lock()

    def sign_in(self, name: str | None, secret: str | None, site_id: str) -> Session:
        expected = self.tokens.get(name or "")
        if expected is None or not secrets.compare_digest(
            expected.encode(), (secret or "").encode()
        ):
            raise RestApiError(
                401,
                "401001",
                "Signin Error",
                "Error signing in to Tableau Server: unknown personal access token name "
                "or wrong secret.",
            )
        session = Session(
            secrets.token_urlsafe(24),
            name or "",
            str(uuid.uuid5(uuid.NAMESPACE_URL, f"user/{name}")),
            site_id,
        )
        with self._lock:
            self._live = {t: s for t, s in self._live.items() if s.token_name != name}
            self._live[session.token] = session
        return session

    def check(self, token: str | None) -> Session:
        with self._lock:
            session = self._live.get(token or "")
        if session is None:
            raise RestApiError(
                401,
                "401002",
                "Unauthorized Access",
                "Invalid authentication credentials were provided: the session token is "
                "missing, signed out or expired. Sign in again.",
            )
        return session

    def sign_out(self, token: str) -> None:
        with self._lock:
            self._live.pop(token, None)

    def expire_all(self) -> None:
        """End every session, as an idle timeout would; later calls get 401."""
        with self._lock:
            self._live.clear()
