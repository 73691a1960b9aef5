"""Signing in to the pages over plain HTTP: where the browser is sent next, which forms are
refused, how failed sign-ins are throttled, and what the cookie holds."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from server._support import Answer, ServerProcess

FORM = "application/x-www-form-urlencoded"


@pytest.fixture
def ui_server(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """A server of the test's own (the pages are not in the OpenAPI document: no contract)."""
    made: list[ServerProcess] = []

    def make(*args: str, name: str = "ui", **kwargs: Any) -> ServerProcess:
        proc = ServerProcess(tmp_path / name, args=["--rate-limit", "0", *args], **kwargs)
        made.append(proc)
        return proc.start()

    yield make
    for proc in made:
        if proc.alive():
            proc.stop()


def sign_in(
    server: ServerProcess, token: str, next_url: str = "/ui/cases", **headers: str
) -> Answer:
    body = urllib.parse.urlencode({"token": token, "next": next_url}).encode()
    host = server.url.removeprefix("http://")
    return server.request(
        "POST",
        "/ui/login",
        body,
        token=None,
        content_type=FORM,
        headers={"Origin": f"http://{host}", **headers},
    )


def cookie_of(answer: Answer) -> str:
    return answer.headers["set-cookie"].split(";", 1)[0]


@pytest.mark.parametrize("next_url", ["/ui/\r\nSet-Cookie: x=1", "/ui/☃", "/ui/\x7f"])
def test_a_next_page_that_is_no_header_value_goes_to_the_default(
    ui_server: Any, next_url: str
) -> None:
    server = ui_server()
    answer = sign_in(server, server.tokens.read, next_url)
    assert answer.status == 303 and answer.headers["location"] == "/ui/cases"
    # Signed in, the sign-in page sends the visitor on the same way.
    query = urllib.parse.urlencode({"next": next_url})
    again = server.get(f"/ui/login?{query}", token=None, headers={"Cookie": cookie_of(answer)})
    assert again.status == 303 and again.headers["location"] == "/ui/cases"
    kept = sign_in(server, server.tokens.read, "/ui/cases?tag=caf%C3%A9")
    assert kept.headers["location"] == "/ui/cases?tag=caf%C3%A9"


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "null"}, {"Origin": "https://attacker.example"}, {"Sec-Fetch-Site": "cross-site"}],
)
def test_sign_in_and_out_from_another_site_are_refused(
    ui_server: Any, headers: dict[str, str]
) -> None:
    server = ui_server()
    forged = sign_in(server, server.tokens.read, **headers)
    assert forged.status == 403 and "set-cookie" not in forged.headers
    assert b"a form from another site was refused" in forged.body
    signed_in = sign_in(server, server.tokens.read)
    assert signed_in.status == 303
    out = server.request(
        "POST",
        "/ui/logout",
        b"",
        token=None,
        content_type=FORM,
        headers={"Cookie": cookie_of(signed_in), **headers},
    )
    assert out.status == 403 and "set-cookie" not in out.headers


def test_the_pages_send_their_origin_with_their_own_forms(ui_server: Any) -> None:
    # Under Referrer-Policy: no-referrer a browser sends "Origin: null" with a same-origin
    # form; same-origin keeps the real origin (and sends no referrer to other sites).
    server = ui_server()
    page = server.get("/ui/login", token=None)
    assert page.headers["referrer-policy"] == "same-origin"


def guess(n: int, prefix: str = "") -> str:
    """A wrong token; each ``n`` has its own first characters unless ``prefix`` is given."""
    return f"{prefix}{n:06d}-not-a-token-at-all"


def test_failed_sign_ins_are_throttled_per_client(ui_server: Any) -> None:
    # The general rate limit is off: sign-in has a limit of its own.
    server = ui_server(env={"TRACELY_SERVER_SIGN_IN_FAILURES": "5"})
    statuses = [sign_in(server, guess(n)).status for n in range(8)]
    assert statuses == [401] * 5 + [429] * 3
    # Throttled, even the right token is not checked (a guesser learns nothing).
    throttled = sign_in(server, server.tokens.read)
    assert throttled.status == 429 and int(throttled.headers["retry-after"]) >= 1
    assert "set-cookie" not in throttled.headers


def test_failed_sign_ins_are_throttled_per_token_prefix_across_clients(ui_server: Any) -> None:
    server = ui_server(
        "--trusted-proxies", "127.0.0.1", env={"TRACELY_SERVER_SIGN_IN_FAILURES": "5"}
    )
    statuses = [
        sign_in(server, guess(n, prefix="tok123"), **{"X-Forwarded-For": f"203.0.113.{n}"}).status
        for n in range(7)
    ]
    assert statuses == [401] * 5 + [429] * 2
    # Another prefix, from another client, is not held up.
    ok = sign_in(server, server.tokens.read, **{"X-Forwarded-For": "203.0.113.99"})
    assert ok.status == 303


def test_x_forwarded_for_counts_only_from_a_named_proxy(ui_server: Any) -> None:
    # No proxy named: the header is the client's to write, so it is ignored (all one client).
    direct = ui_server(name="direct", env={"TRACELY_SERVER_SIGN_IN_FAILURES": "3"})
    spoofed = [
        sign_in(direct, guess(n), **{"X-Forwarded-For": f"198.51.100.{n}"}).status for n in range(5)
    ]
    assert spoofed == [401] * 3 + [429] * 2
    # The general per-client limit on bad API tokens too.
    limited = ui_server(
        "--rate-limit", "0.1", name="limited", env={"TRACELY_SERVER_RATE_BURST": "2"}
    )
    api = [
        limited.get(
            "/api/cases", token="not-a-token", headers={"X-Forwarded-For": f"198.51.100.{n}"}
        ).status
        for n in range(4)
    ]
    assert api == [401, 401, 429, 429]
    # Behind a named proxy each forwarded client has its own budget.
    proxied = ui_server(
        "--trusted-proxies",
        "127.0.0.0/8",
        name="proxied",
        env={"TRACELY_SERVER_SIGN_IN_FAILURES": "3"},
    )
    guesser = {"X-Forwarded-For": "198.51.100.7"}
    assert [sign_in(proxied, guess(n), **guesser).status for n in range(4)] == [401] * 3 + [429]
    colleague = sign_in(proxied, proxied.tokens.read, **{"X-Forwarded-For": "198.51.100.8"})
    assert colleague.status == 303


def test_trusted_proxies_must_be_addresses(tmp_path: Path) -> None:
    from tracely_sdk.errors import ConfigError
    from tracely_sdk.server import ServerConfig

    assert ServerConfig.load({}, trusted_proxies="10.0.0.5, 10.1.0.0/16,::1").trusted_proxies == (
        "10.0.0.5/32",
        "10.1.0.0/16",
        "::1/128",
    )
    with pytest.raises(ConfigError, match=r"TRACELY_SERVER_TRUSTED_PROXIES: 'proxy\.internal'"):
        ServerConfig.load({"TRACELY_SERVER_TRUSTED_PROXIES": "proxy.internal"})


# --------------------------------------------------------------------------------------------
# sessions


def page(server: ServerProcess, cookie: str, path: str = "/ui/cases") -> Answer:
    return server.get(path, token=None, headers={"Cookie": cookie})


def sign_out(server: ServerProcess, cookie: str) -> Answer:
    host = server.url.removeprefix("http://")
    return server.request(
        "POST",
        "/ui/logout",
        b"",
        token=None,
        content_type=FORM,
        headers={"Cookie": cookie, "Origin": f"http://{host}"},
    )


def test_the_cookie_is_a_session_not_the_token_and_sign_out_revokes_it(ui_server: Any) -> None:
    import base64

    server = ui_server()
    signed_in = sign_in(server, server.tokens.write)
    header = signed_in.headers["set-cookie"]
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Max-Age=43200" in header
    cookie = cookie_of(signed_in)
    value = cookie.split("=", 1)[1]
    token = server.tokens.write
    assert token not in value and base64.urlsafe_b64encode(token.encode()).decode() not in value
    # A cookie is no API token.
    assert server.get("/api/cases", token=value).status == 401
    assert page(server, cookie).status == 200
    # Another sign-in with the same token is another session.
    assert cookie_of(sign_in(server, token)) != cookie
    # Signed out, the same cookie (a copy kept by whoever stole it) signs no one in.
    out = sign_out(server, cookie)
    assert out.status == 303 and "Max-Age=0" in out.headers["set-cookie"]
    after = page(server, cookie)
    assert after.status == 303 and after.headers["location"].startswith("/ui/login?next=")


def test_a_session_ends_when_its_token_leaves_the_configuration(ui_server: Any) -> None:
    server = ui_server()
    cookie = cookie_of(sign_in(server, server.tokens.read))
    assert server.stop() == 0
    server.tokens.read = "read-" + "r" * 40  # the operator replaced the token
    server.start()
    assert page(server, cookie).status == 303


def test_sessions_are_shared_by_servers_on_one_postgres_store(
    ui_server: Any, schema_url: str
) -> None:
    from server._support import Tokens

    tokens = Tokens()
    first = ui_server(name="first", store=schema_url, tokens=tokens)
    second = ui_server(name="second", store=schema_url, tokens=tokens)
    cookie = cookie_of(sign_in(first, tokens.read))
    assert page(second, cookie).status == 200
    assert sign_out(second, cookie).status == 303
    assert page(first, cookie).status == 303
