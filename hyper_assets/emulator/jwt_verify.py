"""The server's check of a Connected App JWT (direct trust) presented at sign-in.

Written from RFC 7515 (JWS compact serialisation, HS256), RFC 7519 (JWT claims) and
Tableau's "Configure Connected Apps with Direct Trust", not from the client's
`hyper_assets.tableau._rest.connected_app`, so a bug in the client's signing cannot pass here.

Tableau takes an HS256 JWT signed with one of the app's secret values; the header names
the app (`iss`, its client id) and the secret (`kid`, its id); the claims are `iss` (the
client id again), `aud` "tableau", `sub` (the user), `jti` (unique), `scp` (the scopes)
and `exp`, at most 10 minutes ahead. A refusal is 401 401001 saying what is wrong.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyper_assets.emulator.errors import RestApiError

AUDIENCE = "tableau"
MAX_LIFETIME_SECONDS = 600  # Tableau refuses a JWT that expires later than 10 minutes ahead
CLOCK_SKEW_SECONDS = 5  # allowed on the 10 minutes and on nbf, never on exp itself

_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")


@dataclass(frozen=True)
class ConnectedApp:
    """A connected app with direct trust: its client id and one secret (id and value)."""

    client_id: str
    secret_id: str
    secret_value: str


@dataclass(frozen=True)
class Claims:
    """What a verified JWT grants."""

    subject: str
    jwt_id: str
    scopes: frozenset[str]
    expires: float


def refusal(why: str) -> RestApiError:
    detail = f"Error signing in to Tableau Server: the connected app's JWT {why}."
    return RestApiError(401, "401001", "Signin Error", detail)


def verify_jwt(token: str, apps: Mapping[str, ConnectedApp], now: float) -> Claims:
    """The claims of `token` if it is a valid JWT of one of `apps` (by client id) at `now`
    (seconds since the epoch); otherwise a 401001 refusal naming the fault."""
    parts = token.split(".")
    if len(parts) == 5:
        raise refusal("is encrypted (JWE); sign it with HS256 instead (a JWS)")
    if len(parts) != 3:
        raise refusal("is not a JWT (three base64url parts separated by dots)")
    head, body, signature = parts
    header = _json_object(_decode(head), "header")
    if header.get("alg") != "HS256":
        raise refusal(f"has alg {header.get('alg')!r} in its header; Tableau takes HS256")
    if "crit" in header:
        raise refusal("marks header parameters critical (crit); none is understood here")
    issuer = header.get("iss")
    app = apps.get(issuer) if isinstance(issuer, str) else None
    if app is None or header.get("kid") != app.secret_id:
        raise refusal("names an unknown connected app or secret (header iss and kid)")
    expected = hmac.new(
        app.secret_value.encode(), f"{head}.{body}".encode("ascii"), hashlib.sha256
    ).digest()
    if not hmac.compare_digest(expected, _decode(signature)):
        raise refusal("signature does not verify with the secret (HS256)")
    claims = _json_object(_decode(body), "claims")
    return _check_claims(claims, app, now)


def _check_claims(claims: Mapping[str, Any], app: ConnectedApp, now: float) -> Claims:
    expires = _numeric_date(claims, "exp")
    if expires is None:
        raise refusal("lacks exp (when it expires)")
    if expires <= now:
        raise refusal("has expired (exp); make a fresh one for every sign-in")
    if expires > now + MAX_LIFETIME_SECONDS + CLOCK_SKEW_SECONDS:
        raise refusal(f"expires more than {MAX_LIFETIME_SECONDS} seconds ahead (exp)")
    not_before = _numeric_date(claims, "nbf")
    if not_before is not None and now + CLOCK_SKEW_SECONDS < not_before:
        raise refusal("is not valid yet (nbf)")
    _numeric_date(claims, "iat")
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if AUDIENCE not in audiences:
        raise refusal(f'has the wrong audience (aud must be "{AUDIENCE}")')
    if claims.get("iss") != app.client_id:
        raise refusal("has the wrong issuer (claim iss must be the connected app's client id)")
    subject, jwt_id, scopes = claims.get("sub"), claims.get("jti"), claims.get("scp")
    if not isinstance(subject, str) or not subject:
        raise refusal("lacks sub (the user to sign in as)")
    if not isinstance(jwt_id, str) or not jwt_id:
        raise refusal("lacks jti (a unique id for each JWT)")
    if not isinstance(scopes, list) or not all(isinstance(s, str) and s for s in scopes):
        raise refusal("lacks scp (a list of scopes)")
    return Claims(subject, jwt_id, frozenset(scopes), float(expires))


def _numeric_date(claims: Mapping[str, Any], name: str) -> float | None:
    """A NumericDate claim (RFC 7519 2: a JSON number of seconds), or None if absent."""
    if name not in claims:
        return None
    value = claims[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise refusal(f"has {name} {value!r}, not a number of seconds since 1970")
    return value


def _decode(part: str) -> bytes:
    """base64url without padding (RFC 7515 2); anything else is refused, not skipped."""
    if not _BASE64URL.fullmatch(part) or len(part) % 4 == 1:
        raise refusal("is not a JWT (its parts must be base64url without padding)")
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _json_object(data: bytes, part: str) -> dict[str, Any]:
    """A UTF-8 JSON object with unique member names (RFC 7515 5.2, RFC 7519 7.2)."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names):
            raise ValueError("duplicate member names")
        return dict(pairs)

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        value = json.loads(data.decode(), object_pairs_hook=unique, parse_constant=no_constant)
    except ValueError as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise refusal(f"{part} is not a JSON object: {err}") from None
    if not isinstance(value, dict):
        raise refusal(f"{part} is not a JSON object")
    return value
