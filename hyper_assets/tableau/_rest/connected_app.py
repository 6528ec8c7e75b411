"""Tableau Connected Apps (direct trust): the short-lived JWT a sign-in presents.

Tableau verifies an HS256 JWT signed with the connected app's secret value: header `kid`
(the secret id) and `iss` (the client id); claims `iss`, `aud` "tableau", `sub` (the user
to act as), `scp` (the scopes the calls need), `jti` (unique) and `exp` (at most 10
minutes ahead). See "Configure Connected Apps with Direct Trust" in Tableau's help.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

AUDIENCE = "tableau"
MAX_LIFETIME_SECONDS = 600  # Tableau refuses a JWT that expires later than 10 minutes ahead
#: What a publish calls: list projects and data sources, upload, publish, update data, jobs.
#: (The copy check's sign-in adds the VizQL Data Service's scope for its own session.)
PUBLISH_SCOPES = (
    "tableau:content:read",
    "tableau:file_uploads:create",
    "tableau:datasources:create",
    "tableau:datasources:update",
    "tableau:jobs:read",
)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signature(signed: str, secret_value: str) -> str:
    """The HS256 signature of `header.payload`."""
    return b64url(hmac.new(secret_value.encode(), signed.encode(), hashlib.sha256).digest())


def connected_app_jwt(
    client_id: str,
    secret_id: str,
    secret_value: str,
    username: str,
    scopes: Sequence[str] = PUBLISH_SCOPES,
    *,
    lifetime_seconds: int = 300,
) -> str:
    """A fresh JWT for signing in as `username` through the connected app."""
    header: dict[str, Any] = {"alg": "HS256", "typ": "JWT", "kid": secret_id, "iss": client_id}
    claims: dict[str, Any] = {
        "iss": client_id,
        "aud": AUDIENCE,
        "sub": username,
        "scp": list(scopes),
        "jti": str(uuid.uuid4()),
        "exp": int(time.time()) + min(lifetime_seconds, MAX_LIFETIME_SECONDS),
    }
    signed = ".".join(b64url(json.dumps(part).encode()) for part in (header, claims))
    return f"{signed}.{signature(signed, secret_value)}"
