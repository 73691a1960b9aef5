"""Bearer tokens and scopes, rate limits, and tokens that never reach a log or an answer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from google.rpc.status_pb2 import Status

from server._support import ROOT, ServerProcess, Tokens, token
from tracely_sdk.errors import ConfigError
from tracely_sdk.server._auth import RateLimiter, TokenSet, load_tokens

EMPTY_OTLP = orjson.dumps({"resourceSpans": []})


def test_missing_and_wrong_tokens_are_401(server: ServerProcess) -> None:
    for presented in (None, "not-a-token", ""):
        answer = server.get("/api/traces", token=presented)
        assert answer.status == 401, presented
        assert answer.error["code"] == "unauthorized"
        assert answer.headers["www-authenticate"] == 'Bearer realm="tracely"'
    answer = server.get("/api/traces", token=None, headers={"Authorization": "Basic dTpw"})
    assert answer.status == 401
    answer = server.request(
        "POST", "/v1/traces", EMPTY_OTLP, token="wrong", content_type="application/json"
    )
    assert answer.status == 401 and answer.json()["code"] == 16  # a google.rpc.Status


@pytest.mark.parametrize(
    "scope,method,path,body,allowed",
    [
        ("ingest", "GET", "/api/traces", None, False),
        ("ingest", "POST", "/api/cases", {"trace_id": "1" * 32, "name": "x"}, False),
        ("read", "GET", "/api/cases", None, True),
        ("read", "DELETE", "/api/cases/whatever", None, False),
        ("read", "POST", "/api/recordings", {}, False),
        ("write", "GET", "/api/traces", None, True),
        ("write", "PATCH", "/api/cases/nope", {}, True),
    ],
)
def test_scopes(
    server: ServerProcess, scope: str, method: str, path: str, body: Any, allowed: bool
) -> None:
    answer = server.request(method, path, body, token=scope)
    if allowed:
        assert answer.status not in (401, 403), answer
    else:
        assert answer.status == 403, answer
        assert answer.error["code"] == "forbidden"
        assert "scope" in answer.error["message"]


def test_only_the_ingest_scope_may_send_spans(server: ServerProcess) -> None:
    for scope in ("read", "write"):
        answer = server.request(
            "POST", "/v1/traces", b"", token=scope, content_type="application/x-protobuf"
        )
        assert answer.status == 403
        assert "ingest scope" in Status.FromString(answer.body).message
    answer = server.request(
        "POST", "/v1/traces", b"", token="ingest", content_type="application/x-protobuf"
    )
    assert answer.status == 200


def test_no_token_reaches_a_log_or_an_answer(make_server: Any, weather_run: Any) -> None:
    proc = make_server("--verbose", "--quiet-seconds", "0.1")
    guesses = [token("guess") for _ in range(3)]
    answers: list[bytes] = []
    for guess in guesses:
        answers.append(proc.get("/api/traces", token=guess).body)
        answers.append(
            proc.request(
                "POST", "/v1/traces", EMPTY_OTLP, token=guess, content_type="application/json"
            ).body
        )
    for scope in ("ingest", "read", "write"):
        answers.append(proc.request("POST", "/api/cases", {"x": 1}, token=scope).body)
        answers.append(proc.get("/api/cases/..%2F", token=scope).body)
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans, _ = weather_run("Paris")
    answers.append(
        proc.request(
            "POST",
            "/v1/traces",
            encode_spans(spans).SerializeToString(),
            token="ingest",
            content_type="application/x-protobuf",
        ).body
    )
    assert proc.stop() == 0
    logs = proc.logs()
    assert "GET /api/traces" in logs  # --verbose logs every request ...
    for secret in [*proc.tokens.all(), *guesses]:
        assert secret not in logs  # ... and never a token
        assert all(secret.encode() not in body for body in answers)


def test_a_server_without_tokens_refuses_to_start(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracely_sdk.server",
            "--port",
            "0",
            "--store",
            f"sqlite:///{tmp_path}/t.db",
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT), "TRACELY_SERVER_TOKENS": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no tokens are configured" in lines[0]
    assert "--insecure-no-auth" in lines[0]
    assert result.stdout == ""


def test_insecure_no_auth_allows_everything_and_says_so(make_server: Any) -> None:
    proc = make_server("--insecure-no-auth", tokens=Tokens(), env={"TRACELY_SERVER_TOKENS": ""})
    assert proc.get("/api/traces", token=None).status == 200
    answer = proc.request(
        "POST", "/v1/traces", EMPTY_OTLP, token=None, content_type="application/json"
    )
    assert answer.status == 200
    proc.stop()
    assert "authentication is OFF" in proc.logs()


def test_a_tokens_file(make_server: Any, tmp_path: Path) -> None:
    tokens = Tokens()
    file = tmp_path / "tokens"
    file.write_text(
        f"# the collector\ningest:{tokens.ingest}\n\n  # CI\nread:{tokens.read}\nwrite:{tokens.write}\n"
    )
    proc = make_server("--tokens-file", str(file), tokens=tokens, env={"TRACELY_SERVER_TOKENS": ""})
    assert proc.get("/api/cases", token="read").status == 200
    assert proc.request("POST", "/api/cases", {}, token="read").status == 403


def test_bad_token_configuration_names_the_entry_not_the_token(tmp_path: Path) -> None:
    secret = token("s")
    with pytest.raises(ConfigError) as info:
        TokenSet.parse(f"ingest:{token('a')},admin:{secret}")
    assert "entry 2" in str(info.value) and "admin" in str(info.value)
    assert secret not in str(info.value)
    with pytest.raises(ConfigError, match="entry 1 is not scope:token"):
        TokenSet.parse(secret)
    file = tmp_path / "tokens"
    file.write_text(f"# ok\nread:{token('r')}\nwrite {secret}\n")
    with pytest.raises(ConfigError) as info:
        TokenSet.read_file(file)
    assert "line 3" in str(info.value) and secret not in str(info.value)
    with pytest.raises(ConfigError, match="cannot read it"):
        TokenSet.read_file(tmp_path / "missing")
    with pytest.raises(ConfigError, match="no tokens are configured"):
        load_tokens("", None, insecure=False)


def test_write_implies_read_and_tokens_are_matched_whole() -> None:
    write, read = token("w"), token("r")
    tokens = TokenSet(TokenSet.parse(f"write:{write},read:{read}"))
    principal = tokens.authenticate(f"Bearer {write}", "c")
    assert principal is not None and principal.scopes == {"read", "write"}
    assert write not in principal.name
    assert tokens.authenticate(f"bearer   {read}  ", "c") is not None
    for wrong in (f"Bearer {write[:-1]}", f"Bearer {write}x", f"Token {write}", "Bearer", ""):
        assert tokens.authenticate(wrong, "c") is None


def test_rate_limit_per_token(make_server: Any) -> None:
    proc = make_server("--rate-limit", "2")  # burst 4, then 2 a second
    statuses = [proc.get("/api/cases", token="read").status for _ in range(8)]
    assert statuses[:4] == [200] * 4 and 429 in statuses[4:]
    limited = proc.get("/api/cases", token="read")
    assert limited.status == 429 and limited.error["code"] == "rate_limited"
    assert int(limited.headers["retry-after"]) >= 1
    assert proc.get("/api/cases", token="write").status == 200  # another token, its own bucket
    answer = proc.request(
        "POST", "/v1/traces", EMPTY_OTLP, token="ingest", content_type="application/json"
    )
    assert answer.status == 200
    time.sleep(1.1)
    assert proc.get("/api/cases", token="read").status == 200


def test_token_bucket() -> None:
    limiter = RateLimiter(10, burst=2)
    assert limiter.acquire("a") == 0 and limiter.acquire("a") == 0
    wait = limiter.acquire("a")
    assert 0 < wait <= 0.1
    assert limiter.acquire("b") == 0
    assert RateLimiter(0).acquire("a") == 0
