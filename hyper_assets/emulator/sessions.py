"""Sign-ins (personal access tokens, Connected App JWTs) and sessions, each bound to a site."""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from hyper_assets.emulator.errors import RestApiError
from hyper_assets.emulator.jwt_verify import ConnectedApp, refusal, verify_jwt


@dataclass(frozen=True)
class Session:
    token: str
    token_name: str
    user_id: str
    site_id: str
    scopes: frozenset[str] | None = None  # a JWT's; None: a token's session may do anything

    def allows(self, scope: str) -> bool:
        """Whether the session may call a method needing `scope` (`res:*` covers `res:x`)."""
        if self.scopes is None:
            return True
        wildcard = scope.rpartition(":")[0] + ":*"
        return bool({scope, wildcard} & self.scopes)


class Sessions:
    """Checks sign-ins; one live session per personal access token, as on Tableau Server."""

    def __init__(self, tokens: Mapping[str, str], apps: list[ConnectedApp]) -> None:
        self.tokens = dict(tokens)
        self.apps = {app.client_id: app for app in apps}
        self._live: dict[str, Session] = {}
        self._used_jwt_ids: dict[str, float] = {}  # jti -> exp, until it has expired
        self._lock = threading.Lock()

    def sign_in_jwt(self, jwt: str, site_id: str) -> Session:
        """A session for a Connected App JWT (`verify_jwt`); a JWT is good for one sign-in."""
        now = time.time()
        claims = verify_jwt(jwt, self.apps, now)
        session = Session(
            secrets.token_urlsafe(24),
            f"jwt:{claims.jwt_id}",
            str(uuid.uuid5(uuid.NAMESPACE_URL, f"user/{claims.subject}")),
            site_id,
            claims.scopes,
        )
        with self._lock:
            self._used_jwt_ids = {j: e for j, e in self._used_jwt_ids.items() if e > now}
            if claims.jwt_id in self._used_jwt_ids:
                raise refusal("was used before (jti); make a fresh one for every sign-in")
            self._used_jwt_ids[claims.jwt_id] = claims.expires
            self._live[session.token] = session
        return session

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
