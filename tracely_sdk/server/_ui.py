"""The server's pages under ``/ui``: the store's cases, traces and runs in a browser.

The pages are rendered here by :class:`tracely_sdk._html._views.Pages`, the same renderer as
the static HTML report; the script only enhances them. Every page answers with a
Content-Security-Policy that allows styles, scripts and forms from the server itself only.

Signing in: ``POST /ui/login`` with a token (read scope at least, as for ``GET /api/...``)
starts a session. The cookie (HttpOnly, SameSite=Strict, path ``/ui``, ``Max-Age`` the
session's lifetime) holds a random session id, never the token: a stolen cookie is no API
token, and it dies with the session. Sessions live in the store (the id's hash, the token's
hash, the expiry), not in the process, so that every server sharing a PostgreSQL store knows
them and signing out (which deletes the row) ends the session on all of them; a signed cookie
would need a secret shared by the servers and a revocation record in the store anyway. A
session's scopes are its token's in the server's configuration: a token taken out of it ends
its sessions. Failed sign-ins are throttled per client and per token prefix
(:class:`~tracely_sdk.server._auth.SignInThrottle`). The write actions (promote a trace,
recapture a case) need the write scope, a same-origin request (``Origin``, when the browser
sends it, must be this host; ``null`` is another site), and the form's ``csrf`` value, an HMAC
of the session id the browser cannot be tricked into sending.
A server started with ``--insecure-no-auth`` (``tracely ui``) needs no sign-in; its forms carry
an HMAC under a key made at start, and a request for another host name is refused so that a
page elsewhere cannot reach it through DNS rebinding.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from http.cookies import CookieError, SimpleCookie
from typing import TYPE_CHECKING, Any

from tracely_sdk._html import CSS, JS
from tracely_sdk._html._views import PageError, Pages, Viewer
from tracely_sdk.errors import Conflict, NotFound, StoreError
from tracely_sdk.server._auth import READ, WRITE, Principal
from tracely_sdk.server._http import (
    HTTPError,
    client_of,
    header,
    media_type,
    raw_path,
    response,
)
from tracely_sdk.server._http import body_of as _body_of
from tracely_sdk.store import InvalidCase

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["COOKIE", "PREFIX", "UI_ROUTES", "csrf_value", "is_local_host", "is_same_origin"]

PREFIX = "/ui"
COOKIE = "tracely_token"
_FORM_LIMIT = 16 * 1024
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    # Not no-referrer: under it a browser sends "Origin: null" with the pages' own forms, which
    # cannot then be told from a sandboxed frame's elsewhere. same-origin sends nothing to others.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
# The key of the forms' csrf values when there are no tokens (a server without auth).
_NO_AUTH_KEY = secrets.token_bytes(32)
_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
_VISIBLE_ASCII = re.compile(r"[!-~]+")
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)

Handler = Callable[[Any, "Request", dict[str, str]], "Response"]

# Trace and case pages read the calls shown through the stored outline, but some still decode
# a whole recording: a row with no outline or whose text no longer matches it, a case's two
# versions compared whole (small ones), a run's case. 7 MiB of recording are 160 MB of objects
# while the page is made, and decoding holds the GIL, so more such pages at once are no faster,
# only bigger: at most this many are made at once in a process; the others wait their turn,
# then get a 503.
WHOLE_READERS = 2
_WHOLE_WAIT = 60.0
_whole_readers = threading.BoundedSemaphore(WHOLE_READERS)


def csrf_value(session: str | None) -> str:
    """The value a form must send back: an HMAC of the sign-in session's id (or of nothing,
    under the per-process key, when the server has no tokens)."""
    key = session.encode("utf-8") if session is not None else _NO_AUTH_KEY
    return hmac.new(key, b"tracely-ui-csrf", hashlib.sha256).hexdigest()


# -- responses ----------------------------------------------------------------------------------


def _html(status: int, text: str, headers: Mapping[str, str] | None = None) -> Response:
    from starlette.responses import HTMLResponse

    return HTMLResponse(text, status, {**_HEADERS, **(headers or {})})


def _redirect(location: str, headers: Mapping[str, str] | None = None) -> Response:
    return response(303, b"", None, {**_HEADERS, "Location": location, **(headers or {})})


def _cookie_header(session: str | None, request: Request, max_age: int = 0) -> str:
    secure = "; Secure" if header(request, "X-Forwarded-Proto").lower() == "https" else ""
    if session is None:
        return f"{COOKIE}=; Path={PREFIX}; Max-Age=0; HttpOnly; SameSite=Strict{secure}"
    return (
        f"{COOKIE}={session}; Path={PREFIX}; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"
    )


def _cookie_session(request: Request) -> str | None:
    """The session id in the request's cookie (None: none, or not one this server makes)."""
    raw = header(request, "Cookie")
    if not raw:
        return None
    try:
        jar: SimpleCookie = SimpleCookie(raw)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    if morsel is None or not _SESSION_ID.fullmatch(morsel.value):
        return None
    return morsel.value


def _session_key(session: str) -> str:
    """What the store keeps of a session id: its hash, so that the store alone signs no one in."""
    return hashlib.sha256(session.encode("ascii")).hexdigest()


def _query(request: Request) -> dict[str, str]:
    return dict(request.query_params.multi_items())


def _here(request: Request) -> str:
    query = urllib.parse.urlencode(_query(request))
    return raw_path(request) + ("?" + query if query else "")


# -- who is asking ------------------------------------------------------------------------------


class _Visit:
    """A request to a page: who made it (None: not signed in) and the pages to answer with."""

    def __init__(self, app: Any, request: Request) -> None:
        self.app = app
        self.request = request
        self.pages = Pages(app.store, prefix=PREFIX)
        self.no_auth = bool(app.tokens.insecure and len(app.tokens) == 0)
        self.session = None if self.no_auth else _cookie_session(request)
        self.unavailable: str | None = None
        self.principal: Principal | None = None
        if self.no_auth:
            self.principal = app.tokens.authenticate(None, client_of(request))
        elif self.session is not None:
            try:
                token = app.store.session_token(_session_key(self.session), time.time_ns())
            except StoreError as exc:
                self.unavailable = _clean(app, str(exc))
            else:
                if token is not None:
                    self.principal = app.tokens.authenticate_digest(token)

    def viewer(self, notice: str | None = None, error: str | None = None) -> Viewer:
        may_write = self.principal is not None and self.principal.may(WRITE)
        csrf = csrf_value(None if self.no_auth else self.session) if may_write else None
        signed_in = self.principal is not None and not self.no_auth
        return Viewer(csrf=csrf, notice=notice, error=error, signed_in=signed_in)

    def refusal(self, scope: str) -> Response | None:
        """The answer when this request may not go on: another host, no or a weak token."""
        if self.no_auth and not is_local_host(header(self.request, "Host")):
            return _html(
                400, self.pages.error(400, "this server answers for 127.0.0.1 only", Viewer())
            )
        if self.unavailable is not None:
            return _html(503, self.pages.error(503, self.unavailable, Viewer()))
        if self.principal is None:
            if self.session is not None and self._throttled():
                return self._too_many()
            return _redirect(self.pages.url("login", next=_here(self.request)))
        if self.app.limiter.acquire(self.principal.key):
            return self._too_many()
        if not self.principal.may(scope):
            needs = "write" if scope == WRITE else "read (or write)"
            message = f"this token may not do that: it needs the {needs} scope"
            return _html(403, self.pages.error(403, message, self.viewer()))
        return None

    def _throttled(self) -> bool:
        return bool(self.app.limiter.acquire(f"client:{client_of(self.request)}"))

    def _too_many(self, wait: float = 1.0) -> Response:
        page = self.pages.error(429, "too many requests; try again in a moment", Viewer())
        return _html(429, page, {"Retry-After": str(max(1, math.ceil(wait)))})

    def form(self) -> dict[str, str] | Response:
        """The posted form, once it is shown to come from this server's own page."""
        request = self.request
        if not is_same_origin(request):
            return _html(
                403, self.pages.error(403, "a form from another site was refused", Viewer())
            )
        if media_type(request) != "application/x-www-form-urlencoded":
            return _html(415, self.pages.error(415, "send the page's form", Viewer()))
        raw = _body_of(request)
        if len(raw) > _FORM_LIMIT:
            raise HTTPError(
                413,
                f"the body is {len(raw)} bytes; the limit is {_FORM_LIMIT} bytes",
                detail={"limit": _FORM_LIMIT},
            )
        try:
            body = raw.decode("utf-8")
            fields = urllib.parse.parse_qs(body, keep_blank_values=True, max_num_fields=20)
        except (UnicodeDecodeError, ValueError):
            return _html(400, self.pages.error(400, "the form could not be read", Viewer()))
        return {k: v[-1] for k, v in fields.items()}

    def checked_form(self) -> dict[str, str] | Response:
        """The form of a write action: signed in with write scope, same origin, csrf intact."""
        refused = self.refusal(WRITE)
        if refused is not None:
            return refused
        form = self.form()
        if not isinstance(form, dict):
            return form
        expected = csrf_value(None if self.no_auth else self.session)
        if not hmac.compare_digest(form.get("csrf", "").encode(), expected.encode()):
            page = self.pages.error(
                403, "the form has expired; reload the page and try again", self.viewer()
            )
            return _html(403, page)
        return form


def is_local_host(host: str) -> bool:
    """Whether a ``Host`` header names this machine's loopback (127.0.0.1, localhost, [::1])."""
    return _host_name(host) in _LOCAL_HOSTS


def is_same_origin(request: Request) -> bool:
    """Whether a posted form may come from this server's own page.

    ``Origin`` is checked when the browser sends it; ``null`` (a sandboxed frame, a page from
    a file or data URL) is another site. ``Sec-Fetch-Site``, where sent, must say the same."""
    fetch_site = header(request, "Sec-Fetch-Site").lower()
    if fetch_site and fetch_site not in ("same-origin", "none"):
        return False
    origin = header(request, "Origin")
    return not origin or _host_of(origin) == header(request, "Host").lower()


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _host_of(origin: str) -> str:
    return urllib.parse.urlsplit(origin).netloc.lower()


# -- handlers -----------------------------------------------------------------------------------


def _page(
    render: Callable[[Pages, Request, dict[str, str], Viewer], str], *, whole: bool = False
) -> Handler:
    """A read-only page: signed in with read scope, its store errors shown as pages.
    ``whole``: the page reads a whole recording (see :data:`WHOLE_READERS`)."""

    def handler(app: Any, request: Request, params: dict[str, str]) -> Response:
        visit = _Visit(app, request)
        refused = visit.refusal(READ)
        if refused is not None:
            return refused
        made = lambda viewer: render(visit.pages, request, params, viewer)  # noqa: E731
        return _reading(visit, made) if whole else _render(visit, made)

    return handler


def _reading(visit: _Visit, render: Callable[[Viewer], str]) -> Response:
    """:func:`_render`, once fewer than :data:`WHOLE_READERS` pages read a whole recording."""
    if not _whole_readers.acquire(timeout=_WHOLE_WAIT):
        message = "the server is busy showing other recordings; try again in a moment"
        page = visit.pages.error(503, message, visit.viewer())
        return _html(503, page, {"Retry-After": "5"})
    try:
        return _render(visit, render)
    finally:
        _whole_readers.release()


def _raw(render: Callable[[Pages, dict[str, str]], bytes | tuple[bytes, str]]) -> Handler:
    """The whole of what a page shows cut short, as JSON (or as text, when ``render`` says
    so with a media type): read scope, like the page."""

    def handler(app: Any, request: Request, params: dict[str, str]) -> Response:
        visit = _Visit(app, request)
        refused = visit.refusal(READ)
        if refused is not None:
            return refused
        body: list[bytes | tuple[bytes, str]] = []

        def page(viewer: Viewer) -> str:  # an error is shown as the pages show it
            body.append(render(visit.pages, params))
            return ""

        answer = _reading(visit, page)
        if not body:
            return answer
        raw, kind = body[0] if isinstance(body[0], tuple) else (body[0], "application/json")
        return response(200, raw, kind, _HEADERS)

    return handler


def _call_value(kind: str) -> Handler:
    """One recorded call's whole input, output or error (what a trace or case page cuts)."""
    return _raw(lambda p, a: p.call_value(kind, a["id"], a["number"], a["part"]))


def _render(visit: _Visit, render: Callable[[Viewer], str], status: int = 200) -> Response:
    query = _query(visit.request)
    viewer = visit.viewer(notice=_NOTICES.get(query.get("done", "")))
    try:
        return _html(status, render(viewer))
    except NotFound as exc:
        return _html(404, visit.pages.error(404, _clean(visit.app, str(exc)), viewer))
    except PageError as exc:
        return _html(exc.status, visit.pages.error(exc.status, str(exc), viewer))
    except ValueError as exc:  # an id that cannot be one (the store says what is wrong)
        return _html(400, visit.pages.error(400, _clean(visit.app, str(exc)), viewer))
    except StoreError as exc:
        return _html(503, visit.pages.error(503, _clean(visit.app, str(exc)), viewer))


_NOTICES = {
    "promoted": "Promoted: the trace is now this case's version 1.",
    "recaptured": "Recaptured: the case has a new version from the trace.",
    "signed-out": "Signed out.",
}


def _clean(app: Any, message: str) -> str:
    """A store message without the store's URL (a file path or a database address)."""
    clean: Callable[[str], str] | None = getattr(app, "_clean", None)
    return clean(message) if clean is not None else message


def _home(app: Any, request: Request, params: dict[str, str]) -> Response:
    return _redirect(PREFIX + "/cases")


def _asset(app: Any, request: Request, params: dict[str, str]) -> Response:
    name = params["name"]
    if name == "app.css":
        body, kind = CSS, "text/css; charset=utf-8"
    elif name == "app.js":
        body, kind = JS, "text/javascript; charset=utf-8"
    else:
        return _html(404, Pages(app.store, prefix=PREFIX).error(404, "no such file", Viewer()))
    headers = {**_HEADERS, "Cache-Control": "max-age=300"}
    return response(200, body.encode("utf-8"), kind, headers)


def _login_page(app: Any, request: Request, params: dict[str, str]) -> Response:
    visit = _Visit(app, request)
    next_url = _safe_next(_query(request).get("next"))
    if visit.principal is not None and visit.principal.may(READ):
        return _redirect(next_url)
    notice = _NOTICES.get(_query(request).get("done", ""))
    return _html(200, visit.pages.login(Viewer(notice=notice), next_url=next_url))


def _safe_next(value: str | None) -> str:
    """Where to go after signing in: a page of this server, never another site, and only
    visible ASCII (what the pages' own links hold, percent-encoded), so that it is a valid
    ``Location`` header: a line break or a non-ASCII character gives the default."""
    if (
        value
        and value.startswith(PREFIX + "/")
        and not value.startswith("//")
        and "\\" not in value
        and _VISIBLE_ASCII.fullmatch(value)
    ):
        return value
    return PREFIX + "/cases"


def _login(app: Any, request: Request, params: dict[str, str]) -> Response:
    visit = _Visit(app, request)
    form = visit.form()
    if not isinstance(form, dict):
        return form
    token = form.get("token", "").strip()
    next_url = _safe_next(form.get("next"))
    # Checked before the token is: a throttled guesser learns nothing, not even a right guess.
    client = client_of(request)
    wait = app.sign_ins.wait(client, token)
    if wait:
        return visit._too_many(wait)
    principal = app.tokens.authenticate(f"Bearer {token}", client) if token else None
    if principal is None or not principal.may(READ):
        app.sign_ins.failed(client, token)
        problem = "that token is not valid" if principal is None else "that token may not read"
        return _html(401, visit.pages.login(Viewer(), next_url=next_url, problem=problem))
    session = secrets.token_urlsafe(32)
    lifetime = app.config.session_seconds
    try:
        app.store.create_session(
            _session_key(session),
            app.tokens.token_digest(token),
            time.time_ns() + round(lifetime * 1e9),
        )
    except StoreError as exc:
        return _html(503, visit.pages.error(503, _clean(app, str(exc)), Viewer()))
    cookie = _cookie_header(session, request, max_age=math.ceil(lifetime))
    return _redirect(next_url, {"Set-Cookie": cookie})


def _logout(app: Any, request: Request, params: dict[str, str]) -> Response:
    visit = _Visit(app, request)
    form = visit.form()  # from this server's page; signing out needs no token
    if not isinstance(form, dict):
        return form
    if visit.session is not None:
        # Ended in the store: on every server sharing it, and whoever else holds the cookie.
        try:
            app.store.delete_session(_session_key(visit.session))
        except StoreError as exc:
            return _html(503, visit.pages.error(503, _clean(app, str(exc)), Viewer()))
    location = f"{PREFIX}/login?done=signed-out"
    return _redirect(location, {"Set-Cookie": _cookie_header(None, request)})


def _promote(app: Any, request: Request, params: dict[str, str]) -> Response:
    visit = _Visit(app, request)
    form = visit.checked_form()
    if not isinstance(form, dict):
        return form
    trace_id = params["trace_id"]
    name = form.get("name", "").strip()
    tags = [t.strip() for t in form.get("tags", "").split(",") if t.strip()]
    try:
        if not name:
            raise InvalidCase("a case needs a name: fill in the name field")
        case = app.store.promote(
            trace_id,
            case_id=form.get("id", "").strip() or None,
            name=name,
            entrypoint=form.get("entrypoint", "").strip() or None,
            tags=tags,
        )
    except (InvalidCase, Conflict, ValueError) as exc:
        status = 409 if isinstance(exc, Conflict) else 400
        message = _clean(app, str(exc))
        return _render(visit, lambda v: visit.pages.trace(trace_id, v, problem=message), status)
    except StoreError as exc:
        return _failed(visit, exc)
    return _redirect(visit.pages.url("cases", case.id) + "?done=promoted")


def _recapture(app: Any, request: Request, params: dict[str, str]) -> Response:
    visit = _Visit(app, request)
    form = visit.checked_form()
    if not isinstance(form, dict):
        return form
    case_id = params["case_id"]
    trace_id = form.get("trace_id", "").strip()
    note = form.get("note", "").strip() or None
    try:
        app.store.recapture(case_id, trace_id, note=note)
    except Conflict as exc:
        conflict = app.recapture_inputs(case_id, trace_id)
        message = _clean(app, str(exc))

        def refused(viewer: Viewer) -> str:
            shown = Viewer(csrf=viewer.csrf, error=message, signed_in=viewer.signed_in)
            return visit.pages.case(case_id, {}, shown, conflict=conflict)

        return _render(visit, refused, 409)
    except (InvalidCase, ValueError) as exc:
        message = _clean(app, str(exc))

        def invalid(viewer: Viewer) -> str:
            shown = Viewer(csrf=viewer.csrf, error=message, signed_in=viewer.signed_in)
            return visit.pages.case(case_id, {}, shown)

        return _render(visit, invalid, 400)
    except StoreError as exc:
        return _failed(visit, exc)
    return _redirect(visit.pages.url("cases", case_id) + "?done=recaptured")


def _failed(visit: _Visit, exc: StoreError) -> Response:
    """The page for a store that could not do what was asked (not found: 404, else 503)."""
    status = 404 if isinstance(exc, NotFound) else 503
    message = _clean(visit.app, str(exc))
    return _html(status, visit.pages.error(status, message, visit.viewer()))


UI_ROUTES: tuple[tuple[str, str, Handler], ...] = (
    ("GET", "/", _home),
    ("GET", PREFIX, _home),
    ("GET", PREFIX + "/assets/{name}", _asset),
    ("GET", PREFIX + "/login", _login_page),
    ("POST", PREFIX + "/login", _login),
    ("POST", PREFIX + "/logout", _logout),
    ("GET", PREFIX + "/cases", _page(lambda p, r, a, v: p.cases(_query(r), v))),
    (
        "GET",
        PREFIX + "/cases/{case_id}",
        _page(lambda p, r, a, v: p.case(a["case_id"], _query(r), v), whole=True),
    ),
    ("POST", PREFIX + "/cases/{case_id}/recapture", _recapture),
    ("GET", PREFIX + "/cases/{case_id}/raw", _raw(lambda p, a: p.case_json(a["case_id"]))),
    ("GET", PREFIX + "/cases/{id}/calls/{number}/{part}", _call_value("cases")),
    ("GET", PREFIX + "/traces", _page(lambda p, r, a, v: p.traces(_query(r), v))),
    (
        "GET",
        PREFIX + "/traces/{trace_id}",
        _page(lambda p, r, a, v: p.trace(a["trace_id"], v, _query(r)), whole=True),
    ),
    ("POST", PREFIX + "/traces/{trace_id}/promote", _promote),
    ("GET", PREFIX + "/traces/{trace_id}/raw", _raw(lambda p, a: p.trace_json(a["trace_id"]))),
    ("GET", PREFIX + "/traces/{id}/calls/{number}/{part}", _call_value("traces")),
    ("GET", PREFIX + "/runs", _page(lambda p, r, a, v: p.runs(_query(r), v))),
    ("GET", PREFIX + "/runs/{run_id}", _page(lambda p, r, a, v: p.run(a["run_id"], _query(r), v))),
    (
        "GET",
        PREFIX + "/runs/{run_id}/cases/{number}",
        _page(lambda p, r, a, v: p.run_case(a["run_id"], a["number"], v), whole=True),
    ),
)
