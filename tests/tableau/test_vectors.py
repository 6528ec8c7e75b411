"""Fixed vectors, held against both sides: the client and the emulator each answer to the
specification, never to each other.

- Action batches: `vectors/action_batches.json`, the specification's examples (the seed's
  action-batch text, each quoted by section) and tableauserverclient's sample, with the
  malformed batches each side must refuse and the places where the two sides differ.
- JWTs: computed with `hmac` and `base64` of the standard library (`helpers.hs256`), at a fixed time
  with fixed keys; the hand signing itself is checked against RFC 7515's example A.1.
- Replies: a refusal's code and summary are those of a reply recorded from a real server
  (`recorded/auth_sign_in_error.xml`, from tableauserverclient's test assets).
"""

from __future__ import annotations

import base64
import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from helpers import b64url, hs256
from tableauhyperapi import SqlType, TableDefinition

from hyper_assets.emulator.apply import apply_batch
from hyper_assets.emulator.batch import parse_batch as server_parse
from hyper_assets.emulator.errors import ActionBatchError, RestApiError
from hyper_assets.emulator.jwt_verify import ConnectedApp, verify_jwt
from hyper_assets.emulator.sessions import Sessions
from hyper_assets.errors import ActionValidationError
from hyper_assets.tableau._rest.connected_app import connected_app_jwt, signature, unb64url
from hyper_assets.tableau.actions import batch_to_json, parse_batch as client_parse

HERE = Path(__file__).parent
VECTORS = json.loads((HERE / "vectors" / "action_batches.json").read_text())
NS = {"t": "http://tableau.com/api"}


def named(vector: dict[str, Any]) -> str:
    return str(vector["name"])


def by_name(name: str) -> dict[str, Any]:
    vectors = VECTORS["good"] + VECTORS["bad"] + VECTORS["spec_allows_client_refuses"]
    return next(v for v in vectors if v["name"] == name)


# --- action batches: the emulator's reading ----------------------------------------------------


@pytest.mark.parametrize("vector", VECTORS["good"], ids=named)
def test_the_emulator_reads_every_example_of_the_specification(vector: dict[str, Any]) -> None:
    items = vector["body"]["actions"]
    actions = server_parse(vector["body"])
    assert [a.kind for a in actions] == [item["action"] for item in items]
    for action, item in zip(actions, items, strict=True):
        assert action.target_table == item["target-table"]
        assert action.target_schema == item.get("target-schema")
        assert action.source_table == item.get("source-table")
        assert action.source_schema == item.get("source-schema")
        assert (action.condition is None) == ("condition" not in item)


def test_the_emulator_reads_conditions_and_constants_to_their_values() -> None:
    conditions = [a.condition for a in server_parse(by_name("condition examples")["body"])]
    assert repr(conditions[0]) == (
        "Comparison(op='lt', target_col='date1', source_col=None, const=Literal("
        "type='datetime', value=datetime.datetime(2018, 12, 6, 19, 21, 12, 120000, "
        "tzinfo=datetime.timezone.utc)))"
    )
    assert repr(conditions[2]) == (
        "Junction(op='and', args=(Comparison(op='eq', target_col='key_part_1', "
        "source_col='key_part_1', const=None), Comparison(op='eq', target_col='key_part_2', "
        "source_col='key_part_2', const=None)))"
    )
    assert conditions[3].const.value is None  # type: ignore[union-attr]
    zoned = [a.condition for a in server_parse(by_name("datetime examples")["body"])]
    moments = [c.const.value.isoformat() for c in zoned]  # type: ignore[union-attr]
    assert moments == ["2007-12-03T10:15:30+00:00", "2007-12-03T10:15:30+01:00"]
    booleans = by_name("boolean constants are not case sensitive")["body"]
    flags = [a.condition for a in server_parse(booleans)]
    assert [c.const.value for c in flags] == [True, False]  # type: ignore[union-attr]
    (wipe,) = server_parse(by_name("top-level constant")["body"])
    assert repr(wipe.condition) == "Constant(value=True)"


def _where(vector: dict[str, Any]) -> str:
    field = f"field '{vector['field']}'"
    return field if vector["index"] is None else f"action {vector['index']}, {field}"


@pytest.mark.parametrize("vector", VECTORS["bad"], ids=named)
def test_the_emulator_refuses_each_bad_batch_naming_the_action_and_field(
    vector: dict[str, Any],
) -> None:
    with pytest.raises(RestApiError) as refused:
        server_parse(vector["body"])
    err = refused.value
    assert (err.status, err.code, err.summary) == (400, "400000", "Bad Request")
    assert err.detail.startswith(f"invalid action batch: {_where(vector)}: ")


@pytest.mark.parametrize("vector", VECTORS["spec_allows_client_refuses"], ids=named)
def test_the_emulator_takes_what_the_specification_allows(vector: dict[str, Any]) -> None:
    assert server_parse(vector["body"])


# --- action batches: the client's parser and serialiser ----------------------------------------


@pytest.mark.parametrize("vector", VECTORS["good"], ids=named)
def test_the_client_sends_every_example_as_the_server_reads_it(vector: dict[str, Any]) -> None:
    """Parsed by the client and serialised again, each example means to the emulator what
    the specification's text means."""
    sent = json.loads(json.dumps(batch_to_json(client_parse(vector["body"]))))
    assert server_parse(sent) == server_parse(vector["body"])


@pytest.mark.parametrize("vector", VECTORS["bad"], ids=named)
def test_the_client_judges_each_bad_batch_as_the_vectors_say(vector: dict[str, Any]) -> None:
    if vector["client"] == "accepts":  # a difference the vector's note explains
        assert client_parse(vector["body"])
        return
    with pytest.raises(ActionValidationError) as refused:
        client_parse(vector["body"])
    assert refused.value.index == vector["index"]


@pytest.mark.parametrize("vector", VECTORS["spec_allows_client_refuses"], ids=named)
def test_the_client_refuses_what_the_vectors_say_it_refuses(vector: dict[str, Any]) -> None:
    with pytest.raises(ActionValidationError):
        client_parse(vector["body"])


# --- action batches applied ----------------------------------------------------------------


def test_the_specifications_examples_apply_as_documented(
    hyper: Any, hyper_files: Any, tmp_path: Path
) -> None:
    """The `has` example names a source column in a delete without a source: it parses,
    and applying it is refused; `lt` against NULL matches no row, as in SQL."""
    users = TableDefinition.Column("name", SqlType.text())
    target = hyper_files.create(
        tmp_path / "target.hyper",
        {
            ("Extract", "users"): ([users], [("Bradley",), ("Zoë",)]),
            ("Extract", "t"): ([TableDefinition.Column("a", SqlType.int())], [(1,), (None,)]),
        },
    )
    has = server_parse(by_name("has operator")["body"])
    with pytest.raises(ActionBatchError, match="source-col 'name' needs a source-table"):
        apply_batch(hyper.endpoint, target, None, has)
    null = server_parse(by_name("lt against NULL")["body"])
    assert apply_batch(hyper.endpoint, target, None, null) == [0]
    assert hyper_files.read(target)["Extract.t"] == sorted([(1,), (None,)], key=repr)


# --- JWTs ------------------------------------------------------------------------------------

NOW = 1_700_000_000
APP = ConnectedApp("app-client-id", "app-secret-id", "app-s3cret-value")
APPS = {APP.client_id: APP}
HEADER = {"alg": "HS256", "typ": "JWT", "kid": APP.secret_id, "iss": APP.client_id}
CLAIMS = {
    "iss": APP.client_id,
    "aud": "tableau",
    "sub": "etl@example.com",
    "scp": ["tableau:content:read", "tableau:datasources:update"],
    "jti": "0b0e6f1c-jti-0001",
    "exp": NOW + 300,
}
#: `hand_jwt()` once computed, pinned: the signing below may not drift unnoticed.
PINNED = (
    "eyJhbGciOiAiSFMyNTYiLCAidHlwIjogIkpXVCIsICJraWQiOiAiYXBwLXNlY3JldC1pZCIsICJpc3MiOiAiYXBwL"
    "WNsaWVudC1pZCJ9.eyJpc3MiOiAiYXBwLWNsaWVudC1pZCIsICJhdWQiOiAidGFibGVhdSIsICJzdWIiOiAiZXRsQG"
    "V4YW1wbGUuY29tIiwgInNjcCI6IFsidGFibGVhdTpjb250ZW50OnJlYWQiLCAidGFibGVhdTpkYXRhc291cmNlczp1"
    "cGRhdGUiXSwgImp0aSI6ICIwYjBlNmYxYy1qdGktMDAwMSIsICJleHAiOiAxNzAwMDAwMzAwfQ.9PoSP_1LxQ_xOEM"
    "M46bJuUjQJpWbj2TPa0n_rqUHnSE"
)


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hand_jwt(
    header: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    key: bytes = APP.secret_value.encode(),
    **claims: Any,
) -> str:
    """A JWT from HEADER and CLAIMS with `header` and `claims` laid over them, `drop`ped
    claims left out, signed with `key`."""
    body = {k: v for k, v in (CLAIMS | claims).items() if k not in drop}
    signing_input = ".".join(
        b64url(json.dumps(part).encode()) for part in (HEADER | (header or {}), body)
    )
    return f"{signing_input}.{hs256(signing_input, key)}"


def raw_jwt(header: str, claims: str, key: bytes = APP.secret_value.encode()) -> str:
    """A JWT of header and claims given as JSON text (for what json.dumps cannot write)."""
    signing_input = f"{b64url(header.encode())}.{b64url(claims.encode())}"
    return f"{signing_input}.{hs256(signing_input, key)}"


def test_the_hand_signing_reproduces_rfc_7515_example_a1() -> None:
    key = unb64(
        "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"
    )
    signing_input = (
        "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9."
        "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19y"
        "b290Ijp0cnVlfQ"
    )
    assert hs256(signing_input, key) == "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert hand_jwt() == PINNED


def test_the_clients_signature_is_hs256_of_the_fixed_vector() -> None:
    signing_input, signed = PINNED.rsplit(".", 1)
    assert signature(signing_input, APP.secret_value) == signed
    header, claims = (json.loads(unb64url(part)) for part in signing_input.split("."))
    assert (header, claims) == (HEADER, CLAIMS)


def test_the_clients_jwt_carries_what_tableau_requires() -> None:
    token = connected_app_jwt(APP.client_id, APP.secret_id, APP.secret_value, "etl@example.com")
    head, body, signed = token.split(".")
    assert hs256(f"{head}.{body}", APP.secret_value.encode()) == signed
    header, claims = json.loads(unb64(head)), json.loads(unb64(body))
    assert header == HEADER
    assert set(claims) == {"iss", "aud", "sub", "scp", "jti", "exp"}
    assert (claims["iss"], claims["aud"], claims["sub"]) == (
        APP.client_id,
        "tableau",
        "etl@example.com",
    )
    assert isinstance(claims["jti"], str) and claims["jti"]
    assert all(isinstance(scope, str) for scope in claims["scp"])
    now = time.time()
    assert now < claims["exp"] <= now + 600
    assert verify_jwt(token, APPS, now).subject == "etl@example.com"


@pytest.mark.parametrize(
    "token",
    [
        PINNED,
        hand_jwt(aud=["other", "tableau"]),  # RFC 7519 4.1.3: aud may be a list
        hand_jwt(exp=NOW + 600),
        hand_jwt(exp=NOW + 0.5),  # a NumericDate may have a fraction
        hand_jwt(nbf=NOW, iat=NOW),
        hand_jwt(header={"typ": "jwt"}),
        hand_jwt(scp=[]),
    ],
)
def test_the_emulator_accepts_good_jwts(token: str) -> None:
    claims = verify_jwt(token, APPS, NOW)
    assert (claims.subject, claims.jwt_id) == ("etl@example.com", CLAIMS["jti"])


def _flip(token: str) -> str:
    head, body, signed = token.split(".")
    return f"{head}.{body}.{signed[:-2]}{'A' if signed[-2] != 'A' else 'B'}{signed[-1]}"


def _unsigned() -> str:
    """RFC 7519 6.1's unsecured JWT: alg none and an empty signature."""
    header = b64url(json.dumps(HEADER | {"alg": "none"}).encode())
    return f"{header}.{PINNED.split('.')[1]}."


def _resigned_claims() -> str:
    """The pinned JWT with other claims under its signature."""
    head, _, signed = PINNED.split(".")
    return f"{head}.{b64url(json.dumps(CLAIMS | {'sub': 'admin'}).encode())}.{signed}"


BAD_JWTS = [
    ("another secret", hand_jwt(key=b"not-the-secret"), "signature does not verify"),
    ("a changed signature", _flip(PINNED), "signature does not verify"),
    ("claims changed after signing", _resigned_claims(), "signature does not verify"),
    ("an unknown secret id", hand_jwt(header={"kid": "other"}), "unknown connected app or secret"),
    ("an unknown app", hand_jwt(header={"iss": "other"}), "unknown connected app or secret"),
    ("no kid", hand_jwt(header={"kid": None}), "unknown connected app or secret"),
    ("alg none", _unsigned(), "alg 'none'"),
    ("alg HS512", hand_jwt(header={"alg": "HS512"}), "alg 'HS512'"),
    ("a critical extension", hand_jwt(header={"crit": ["exp"]}), "crit"),
    ("expired", hand_jwt(exp=NOW - 1), "has expired"),
    ("expiring now", hand_jwt(exp=NOW), "has expired"),
    ("too long", hand_jwt(exp=NOW + 606), "more than 600 seconds ahead"),
    ("no exp", hand_jwt(drop=("exp",)), "lacks exp"),
    ("exp as text", hand_jwt(exp=str(NOW + 300)), "not a number"),
    ("exp true", hand_jwt(exp=True), "not a number"),
    ("not valid yet", hand_jwt(nbf=NOW + 60), "not valid yet"),
    ("the wrong audience", hand_jwt(aud="someone-else"), "wrong audience"),
    ("no audience", hand_jwt(drop=("aud",)), "wrong audience"),
    ("the wrong issuer", hand_jwt(iss="other"), "wrong issuer"),
    ("no sub", hand_jwt(drop=("sub",)), "lacks sub"),
    ("an empty sub", hand_jwt(sub=""), "lacks sub"),
    ("no jti", hand_jwt(drop=("jti",)), "lacks jti"),
    ("no scp", hand_jwt(drop=("scp",)), "lacks scp"),
    ("scp as text", hand_jwt(scp="tableau:content:read"), "lacks scp"),
    ("two parts", PINNED.rsplit(".", 1)[0], "not a JWT"),
    ("five parts (JWE)", "a.b.c.d.e", "encrypted"),
    ("padding", PINNED.replace(".", "=.", 1), "base64url without padding"),
    ("standard base64", PINNED[:10] + "+" + PINNED[11:], "base64url without padding"),
    (
        "a duplicate claim",
        raw_jwt(json.dumps(HEADER), json.dumps(CLAIMS)[:-1] + ', "sub": "admin"}'),
        "not a JSON object",
    ),
    ("claims as a list", raw_jwt(json.dumps(HEADER), "[1, 2]"), "claims is not a JSON object"),
    ("a header that is not JSON", raw_jwt("{alg: HS256}", json.dumps(CLAIMS)), "header is not"),
    ("NaN in the claims", raw_jwt(json.dumps(HEADER), '{"exp": NaN}'), "not a JSON object"),
]


@pytest.mark.parametrize(
    ("token", "phrase"), [b[1:] for b in BAD_JWTS], ids=[b[0] for b in BAD_JWTS]
)
def test_the_emulator_refuses_each_bad_jwt_as_tableau_does(token: str, phrase: str) -> None:
    recorded = ET.parse(HERE / "recorded" / "auth_sign_in_error.xml").getroot()
    error = recorded.find("t:error", NS)
    assert error is not None
    with pytest.raises(RestApiError) as refused:
        verify_jwt(token, APPS, NOW)
    err = refused.value
    assert (err.status, err.code, err.summary) == (
        401,
        error.get("code"),
        error.findtext("t:summary", namespaces=NS),
    )
    assert err.detail.startswith(error.findtext("t:detail", namespaces=NS) or "?")
    assert phrase in err.detail


def test_a_jwt_signs_in_once() -> None:
    sessions = Sessions({}, [APP])
    token = hand_jwt(exp=int(time.time()) + 300)
    assert sessions.sign_in_jwt(token, "site").scopes == frozenset(CLAIMS["scp"])
    with pytest.raises(RestApiError, match=r"used before \(jti\)"):
        sessions.sign_in_jwt(token, "site")
    assert sessions.sign_in_jwt(hand_jwt(exp=int(time.time()) + 300, jti="another"), "site")
