"""Live status in AWS: the $connect authorizer (real RS256 tokens), connections and the pusher's logic."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import jwt
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from cryptography.hazmat.primitives.asymmetric import rsa
from rag_ingest.adapters.jwks import CachedJwks, jwks_url_for
from rag_ingest.adapters.live_connections import ManagementApiPoster
from rag_ingest.core.auth import InvalidTenantError, InvalidTokenError, TokenVerifier
from rag_ingest.core.errors import ConfigurationError, TransientError
from rag_ingest.live.connections import (
    MAX_CONNECTION_SECONDS,
    Connection,
    ConnectionGoneError,
    LivePusher,
    PostThrottledError,
    PushFailedError,
    UnauthorizedError,
    authorize_connect,
    close_connection,
    open_connection,
)
from rag_ingest.live.updates import update_for

from tests.support.aws import FakeLambdaContext, import_handler
from tests.support.fakes import MemoryConnections

pytestmark = pytest.mark.unit

ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Pool"
AUDIENCE = "web-client-id"
METHOD_ARN = "arn:aws:execute-api:eu-west-1:123456789012:abc123/live/$connect"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwks(key: rsa.RSAPrivateKey = KEY, kid: str = "k1") -> dict[str, Any]:
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {"keys": [{**jwk, "kid": kid, "alg": "RS256", "use": "sig"}]}


def _token(key: rsa.RSAPrivateKey = KEY, **overrides: Any) -> str:
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 600,
        "sub": "user-1",
        "token_use": "id",
        "email": "ada@example.com",
        "cognito:username": "ada",
        "custom:tenant_id": "acme",
    }
    claims.update(overrides)
    claims = {name: value for name, value in claims.items() if value is not None}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


VERIFIER = TokenVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=_jwks)


# -- authorizer ---------------------------------------------------------------------------------


def test_valid_token_is_allowed_with_the_tenant_in_the_context() -> None:
    answer = authorize_connect(VERIFIER, _token(), METHOD_ARN)
    assert answer["principalId"] == "user-1"
    assert answer["policyDocument"]["Statement"] == [
        {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": METHOD_ARN}
    ]
    assert answer["context"] == {"tenant_id": "acme", "sub": "user-1", "username": "ada", "groups": "[]"}


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(None, id="missing"),
        pytest.param("", id="empty"),
        pytest.param(_token(key=OTHER_KEY), id="bad-signature"),
        pytest.param(_token(exp=int(time.time()) - 5), id="expired"),
        pytest.param(_token(aud="another-client"), id="wrong-audience"),
        pytest.param(_token(iss="https://cognito-idp.eu-west-1.amazonaws.com/other"), id="wrong-issuer"),
        pytest.param(_token(token_use="access"), id="access-token"),
        pytest.param("not-a-jwt", id="garbage"),
    ],
)
def test_invalid_token_is_unauthorized(token: str | None) -> None:
    with pytest.raises(UnauthorizedError) as raised:
        authorize_connect(VERIFIER, token, METHOD_ARN)
    # API Gateway turns exactly this message into 401.
    assert str(raised.value) == "Unauthorized"


@pytest.mark.parametrize("tenant", [None, "", "a/b", "x" * 65, "ténant"])
def test_valid_token_without_a_valid_tenant_is_denied(tenant: str | None) -> None:
    claims: dict[str, Any] = {"custom:tenant_id": tenant}
    answer = authorize_connect(VERIFIER, _token(**claims), METHOD_ARN)
    assert answer["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    assert answer["context"] == {}


def _handler_env(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, str]:
    # monkeypatch restores the environment import_handler sets.
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def test_authorizer_handler_reads_the_query_string_token(monkeypatch: pytest.MonkeyPatch) -> None:
    app = import_handler("live_authorizer", _handler_env(monkeypatch, TOKEN_ISSUER=ISSUER, TOKEN_AUDIENCE=AUDIENCE))
    # The handler's key set would come from Cognito over HTTPS; here it is the test's key.
    monkeypatch.setattr(app, "verifier", VERIFIER)
    event = {"type": "REQUEST", "methodArn": METHOD_ARN, "queryStringParameters": {"token": _token()}}
    answer = app.handler(event, FakeLambdaContext())
    assert answer["policyDocument"]["Statement"][0]["Effect"] == "Allow"
    assert answer["context"]["tenant_id"] == "acme"
    with pytest.raises(UnauthorizedError):
        app.handler({"type": "REQUEST", "methodArn": METHOD_ARN, "queryStringParameters": None}, FakeLambdaContext())


def test_authorizer_handler_refuses_an_environment_without_https_issuer(monkeypatch: pytest.MonkeyPatch) -> None:
    env = _handler_env(monkeypatch, TOKEN_ISSUER="http://issuer.example", TOKEN_AUDIENCE="x")
    with pytest.raises(ConfigurationError):
        import_handler("live_authorizer", env)


def test_authorizer_handler_takes_an_http_issuer_on_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local stack's issuer (docs/local-stack.md, "Live status"); its key set is then fetched over http.
    for issuer in ("http://127.0.0.1:8080/_local/oidc", "http://localhost:8080/_local/oidc"):
        app = import_handler("live_authorizer", _handler_env(monkeypatch, TOKEN_ISSUER=issuer, TOKEN_AUDIENCE="x"))
        assert app.verifier.issuer == issuer
    for issuer in ("http://127.0.0.1.example/pool", "http://10.0.0.1/pool"):
        with pytest.raises(ConfigurationError):
            import_handler("live_authorizer", _handler_env(monkeypatch, TOKEN_ISSUER=issuer, TOKEN_AUDIENCE="x"))


# -- JWKS cache ---------------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    """The time PyJWT's key set cache stamps and reads (jwt.api_jwk, jwt.jwk_set_cache), stepped by the test."""
    stepped = _Clock()
    monkeypatch.setattr(jwt.api_jwk, "time", stepped)
    monkeypatch.setattr(jwt.jwk_set_cache, "time", stepped)
    return stepped


class _Issuer(jwt.PyJWKClient):
    """PyJWT's client with the endpoint's answers given in order (an exception is raised)."""

    def __init__(self, answers: list[Any], lifespan: float = 3600) -> None:
        super().__init__(jwks_url_for(ISSUER), cache_jwk_set=True, lifespan=lifespan)
        self.answers = answers
        self.fetched = 0

    def fetch_data(self) -> Any:
        self.fetched += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_jwks_is_fetched_once_then_refreshed_after_max_age(clock: _Clock) -> None:
    issuer = _Issuer([_jwks(kid="k1"), _jwks(kid="k2")], lifespan=60)
    jwks = CachedJwks(jwks_url_for(ISSUER + "/"), client=issuer)
    assert jwks.url == ISSUER + "/.well-known/jwks.json"
    assert jwks().keys[0].key_id == "k1"
    clock.now += 59
    assert jwks().keys[0].key_id == "k1"
    clock.now += 2  # PyJWT's cache expires strictly after its lifespan
    assert jwks().keys[0].key_id == "k2"
    assert issuer.fetched == 2


def test_jwks_keeps_the_last_good_set_when_a_refresh_fails(clock: _Clock) -> None:
    issuer = _Issuer([_jwks(), jwt.PyJWKClientConnectionError("connection reset")], lifespan=1)
    jwks = CachedJwks(jwks_url_for(ISSUER), client=issuer)
    first = jwks()
    clock.now += 5
    assert jwks() is first
    assert issuer.fetched == 2


def test_jwks_first_fetch_failure_is_an_invalid_token_not_a_crash() -> None:
    failures: list[Any] = [jwt.PyJWKClientConnectionError("no route to host") for _ in range(2)]
    verifier = TokenVerifier(ISSUER, AUDIENCE, CachedJwks(jwks_url_for(ISSUER), client=_Issuer(failures)))
    with pytest.raises(InvalidTokenError):
        verifier.verify(_token())
    with pytest.raises(UnauthorizedError):
        authorize_connect(verifier, _token(), METHOD_ARN)


def test_a_verifier_takes_the_parsed_key_set_as_well_as_its_json() -> None:
    parsed = TokenVerifier(ISSUER, AUDIENCE, CachedJwks(jwks_url_for(ISSUER), client=_Issuer([_jwks()])))
    assert parsed.verify(_token())["custom:tenant_id"] == VERIFIER.verify(_token())["custom:tenant_id"] == "acme"


def test_jwks_url_must_be_https() -> None:
    with pytest.raises(ValueError, match="https"):
        CachedJwks("http://issuer.example/.well-known/jwks.json")


# -- connections --------------------------------------------------------------------------------


def test_connect_records_the_tenant_and_expires_after_two_hours() -> None:
    store = MemoryConnections()
    connection = open_connection(store, "c1", {"tenant_id": "acme", "sub": "user-1"}, now=1_000)
    assert connection == Connection("c1", "acme", "user-1", 1_000, 1_000 + MAX_CONNECTION_SECONDS)
    assert store.items["c1"] == connection
    close_connection(store, "c1")
    close_connection(store, "c1")  # a repeated $disconnect is harmless
    assert store.items == {}


@pytest.mark.parametrize("context", [{}, {"tenant_id": "../other"}, {"tenant_id": ""}])
def test_connect_without_a_valid_tenant_is_refused(context: dict[str, str]) -> None:
    store = MemoryConnections()
    with pytest.raises(InvalidTenantError):
        open_connection(store, "c1", context)
    assert store.items == {}


# -- pusher -------------------------------------------------------------------------------------


def _item(tenant: str = "acme", **fields: Any) -> dict[str, Any]:
    """A documents-table item as the stream's deserialized NewImage carries it."""
    item: dict[str, Any] = {
        "document_id": "01JDOC",
        "tenant_id": tenant,
        "status": "PROCESSING",
        "filename": "report.pdf",
        "stage": "EMBED",
        "embedded_parts": {"0:16", "1:16"},
        "embed_total": 40,
        "attempts": {"EMBED": 2},
        "created_at": "2026-12-01T05:00:00.000+00:00",
        "updated_at": "2026-12-01T05:00:09.000+00:00",
    }
    item.update(fields)
    return item


class ScriptedPoster:
    """The management API's answers, scripted per connection (default: delivered)."""

    def __init__(self, script: dict[str, list[Exception | None]] | None = None) -> None:
        self.script = script or {}
        self.posts: list[tuple[str, dict[str, Any]]] = []

    def post(self, connection_id: str, data: bytes) -> None:
        self.posts.append((connection_id, json.loads(data)))
        answers = self.script.get(connection_id, [])
        answer = answers.pop(0) if answers else None
        if answer is not None:
            raise answer


def _store(*connections: tuple[str, str]) -> MemoryConnections:
    store = MemoryConnections()
    for connection_id, tenant in connections:
        open_connection(store, connection_id, {"tenant_id": tenant, "sub": "u"}, now=0)
    return store


def test_change_goes_to_every_connection_of_its_tenant_only() -> None:
    store = _store(("a1", "acme"), ("a2", "acme"), ("b1", "globex"))
    poster = ScriptedPoster()
    report = LivePusher(store, poster, sleep=lambda _: None).push(_item())
    expected = update_for(_item()).message
    assert expected["type"] == "document.updated"
    assert expected["document"]["progress"] == {"done": 32, "total": 40}
    assert poster.posts == [("a1", expected), ("a2", expected)]
    assert (report.tenant_id, report.document_id, report.delivered, report.gone) == ("acme", "01JDOC", ["a1", "a2"], [])


def test_gone_connection_is_deleted_and_the_others_still_get_the_change() -> None:
    store = _store(("a1", "acme"), ("a2", "acme"))
    poster = ScriptedPoster({"a1": [ConnectionGoneError("a1")]})
    report = LivePusher(store, poster, sleep=lambda _: None).push(_item())
    assert report.gone == ["a1"] and report.delivered == ["a2"]
    assert store.for_tenant("acme") == ["a2"]


def test_throttled_post_is_retried_with_backoff() -> None:
    store = _store(("a1", "acme"))
    poster = ScriptedPoster({"a1": [PostThrottledError("a1"), PostThrottledError("a1")]})
    pauses: list[float] = []
    report = LivePusher(store, poster, max_attempts=3, base_delay_seconds=0.1, sleep=pauses.append).push(_item())
    assert report.delivered == ["a1"]
    assert [connection for connection, _ in poster.posts] == ["a1", "a1", "a1"]
    assert len(pauses) == 2 and 0 <= pauses[0] <= 0.1 and 0 <= pauses[1] <= 0.2


def test_post_still_throttled_after_every_attempt_fails_the_record() -> None:
    store = _store(("a1", "acme"))
    poster = ScriptedPoster({"a1": [PostThrottledError("a1")] * 3})
    with pytest.raises(PushFailedError) as raised:
        LivePusher(store, poster, max_attempts=3, sleep=lambda _: None).push(_item())
    assert isinstance(raised.value.causes[0], PostThrottledError)
    assert store.for_tenant("acme") == ["a1"]  # throttled is not gone


def test_other_post_failures_fail_the_record_after_the_other_connections_got_it() -> None:
    store = _store(("a1", "acme"), ("a2", "acme"), ("a3", "acme"))
    poster = ScriptedPoster({"a1": [RuntimeError("500 from the management API")], "a2": [ConnectionGoneError("a2")]})
    with pytest.raises(PushFailedError, match="1 of 3 connections failed") as raised:
        LivePusher(store, poster, sleep=lambda _: None).push(_item())
    report = raised.value.report
    assert (report.failed, report.gone, report.delivered) == (["a1"], ["a2"], ["a3"])
    assert store.for_tenant("acme") == ["a1", "a3"]


@pytest.mark.parametrize(
    ("image", "reason"),
    [
        pytest.param(None, "no new image", id="removed"),
        pytest.param({}, "no new image", id="empty"),
        pytest.param({"document_id": "d1", "status": "READY"}, "not a valid document record", id="no-tenant"),
        pytest.param(_item(status="SOMETHING"), "not a valid document record", id="bad-status"),
    ],
)
def test_records_with_nothing_to_tell_are_skipped_not_retried(image: dict[str, Any] | None, reason: str) -> None:
    store = _store(("a1", "acme"))
    poster = ScriptedPoster()
    report = LivePusher(store, poster, sleep=lambda _: None).push(image)
    assert report.skipped_reason is not None and reason in report.skipped_reason
    assert poster.posts == []


def test_tenant_without_connections_costs_no_post() -> None:
    poster = ScriptedPoster()
    report = LivePusher(_store(("b1", "globex")), poster, sleep=lambda _: None).push(_item())
    assert poster.posts == [] and report.delivered == []


# -- management API adapter: how PostToConnection answers map to the pusher's errors -----------


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        pytest.param("GoneException", 410, ConnectionGoneError, id="gone"),
        pytest.param("LimitExceededException", 429, PostThrottledError, id="limit-exceeded"),
        pytest.param("TooManyRequestsException", 429, PostThrottledError, id="too-many-requests"),
        pytest.param("InternalServerError", 500, TransientError, id="server-error"),
        pytest.param("ForbiddenException", 403, ClientError, id="forbidden"),
    ],
)
def test_management_api_errors_map_to_the_pushers_errors(code: str, status: int, expected: type[Exception]) -> None:
    client = boto3.client(
        "apigatewaymanagementapi",
        endpoint_url="https://abc123.execute-api.eu-west-1.amazonaws.com/live",
        region_name="eu-west-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    poster = ManagementApiPoster("unused", management_client=client)
    with Stubber(client) as stubber:
        stubber.add_response("post_to_connection", {}, {"ConnectionId": "c1", "Data": b"{}"})
        stubber.add_client_error("post_to_connection", service_error_code=code, http_status_code=status)
        poster.post("c1", b"{}")
        with pytest.raises(expected):
            poster.post("c1", b"{}")
        stubber.assert_no_pending_responses()


# -- per-document access on the live channel ---------------------------------------------------------


def test_the_authorizer_passes_the_tokens_groups_and_connect_keeps_them() -> None:
    answer = authorize_connect(VERIFIER, _token(**{"cognito:groups": ["legal", "tenant-admins"]}), METHOD_ARN)
    assert json.loads(answer["context"]["groups"]) == ["legal", "tenant-admins"]
    store = MemoryConnections()
    connection = open_connection(store, "c1", answer["context"], now=0)
    assert connection.groups == ("legal", "tenant-admins")
    assert connection.principal().is_tenant_admin
    assert not connection.principal("other-admins").is_tenant_admin


def test_a_restricted_document_is_announced_only_to_who_may_read_it() -> None:
    store = MemoryConnections()
    for connection_id, subject, groups in [
        ("uploader", "u-up", "[]"),
        ("listed", "u-listed", "[]"),
        ("member", "u-member", '["legal"]'),
        ("admin", "u-admin", '["tenant-admins"]'),
        ("other", "u-other", '["sales"]'),
    ]:
        open_connection(store, connection_id, {"tenant_id": "acme", "sub": subject, "groups": groups}, now=0)
    open_connection(store, "globex", {"tenant_id": "globex", "sub": "u-up", "groups": "[]"}, now=0)
    poster = ScriptedPoster()
    item = _item(uploaded_by="u-up", access={"users": ["u-listed"], "groups": ["legal"]})
    report = LivePusher(store, poster, sleep=lambda _: None).push(item)
    assert sorted(report.delivered) == ["admin", "listed", "member", "uploader"]
    assert report.withheld == ["other"]
    assert {connection for connection, _ in poster.posts} == {"admin", "listed", "member", "uploader"}
    # An open document still goes to the whole tenant.
    everyone = LivePusher(store, ScriptedPoster(), sleep=lambda _: None).push(_item(uploaded_by="u-up"))
    assert sorted(everyone.delivered) == ["admin", "listed", "member", "other", "uploader"]
