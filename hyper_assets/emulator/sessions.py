"""Sign-ins (personal access tokens, Connected App JWTs) and sessions, each bound to a site."""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyper_assets.emulator.errors import RestApiError
from hyper_assets.tableau.connected_app import (
    AUDIENCE,
    MAX_LIFETIME_SECONDS,
    signature,
    unb64url,
)


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


@dataclass(frozen=True)
class ConnectedApp:
    """A connected app with direct trust: its client id and one secret (id and value)."""

    client_id: str
    secret_id: str
    secret_value: str


class Sessions:
    """Checks sign-ins; one live session per personal access token, as on Tableau Server."""

    def __init__(self, tokens: Mapping[str, str], apps: list[ConnectedApp]) -> None:
        self.tokens = dict(tokens)
        self.apps = {app.client_id: app for app in apps}
        self._live: dict[str, Session] = {}
        self._lock = threading.Lock()

    def sign_in_jwt(self, jwt: str, site_id: str) -> Session:
        """A session for a Connected App JWT: signature, expiry, audience and claims checked."""
        claims = self._verify(jwt)
        session = Session(
            secrets.token_urlsafe(24),
            f"jwt:{claims['jti']}",
            str(uuid.uuid5(uuid.NAMESPACE_URL, f"user/{claims['sub']}")),
            site_id,
            frozenset(claims["scp"]),
        )
        with self._lock:
            self._live[session.token] = session
        return session

    def _verify(self, jwt: str) -> dict[str, Any]:
        def refuse(why: str) -> RestApiError:
            detail = f"Error signing in to Tableau Server: the connected app's JWT {why}."
            return RestApiError(401, "401001", "Signin Error", detail)

        try:
            head, body, signed = jwt.split(".")
            header, claims = (json.loads(unb64url(part)) for part in (head, body))
        except ValueError:
            raise refuse("is not a JWT (three base64url parts of JSON)") from None
        app = self.apps.get(header.get("iss", ""))
        if app is None or header.get("kid") != app.secret_id:
            raise refuse("names an unknown connected app or secret (header iss and kid)")
        if header.get("alg") != "HS256" or not secrets.compare_digest(
            signed, signature(f"{head}.{body}", app.secret_value)
        ):
            raise refuse("signature does not verify with the secret (HS256)")
        now, expires = time.time(), claims.get("exp")
        if not isinstance(expires, int) or expires <= now:
            raise refuse("has expired (exp); make a fresh one for every sign-in")
        if expires > now + MAX_LIFETIME_SECONDS + 5:
            raise refuse(f"expires more than {MAX_LIFETIME_SECONDS} seconds ahead")
        if claims.get("aud") != AUDIENCE or claims.get("iss") != app.client_id:
            raise refuse(f'has the wrong audience or issuer (aud must be "{AUDIENCE}")')
        scopes = claims.get("scp")
        if not claims.get("sub") or not claims.get("jti") or not isinstance(scopes, list):
            raise refuse("lacks sub (the user), jti or scp (a list of scopes)")
        return claims

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
