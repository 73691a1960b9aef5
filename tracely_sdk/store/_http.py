"""The store interface over HTTP: a tracely server as the store (``TRACELY_STORE=http://...``).

:class:`HTTPStore` implements every :class:`~tracely_sdk.store.Store` method against the server's
JSON API with urllib3 (its ``Retry`` for the retries), so that ``tracely replay`` and
``tracely cases ...`` work the same against a team's server as against a local file:

- the bearer token comes from the ``token`` setting (``TRACELY_TOKEN``; it is never printed,
  logged or put in a message);
- every request has a timeout; a call that is safe to repeat (everything but promoting a
  trace) is retried with exponential backoff on a connection failure, a timeout, ``429`` and
  ``503``, waiting as long as the server's ``Retry-After`` asks (within a bound);
- the server's answers map onto the store's errors: ``404`` → :class:`NotFound`, ``409`` →
  :class:`Conflict` with the server's message, ``400`` → :class:`InvalidCase` (a
  :class:`StoreError` and a ``ValueError``) with the server's message, ``401``/``403`` → a
  :class:`StoreError` that says what is wrong with the token, a server that cannot be reached
  → a :class:`StoreError` naming the URL and what to check;
- redirects are not followed (the token would travel with them).

The URL is the server's base URL (``https://tracely.example.com``, or with a path prefix behind a
proxy), optionally with ``?timeout=SECONDS`` (per request, default 30) and ``?retries=N``
(default 4).
"""

from __future__ import annotations

import ipaddress
import random
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn, TypeVar

import orjson
import urllib3
from urllib3.exceptions import (
    HTTPError,
    InvalidHeader,
    MaxRetryError,
    NewConnectionError,
)
from urllib3.exceptions import TimeoutError as _Timeout
from urllib3.util import Retry

from tracely_sdk._config import resolve
from tracely_sdk.errors import ConfigError, Conflict, NotFound, StoreError
from tracely_sdk.store import (
    Case,
    CaseVersion,
    InvalidCase,
    Recording,
    Run,
    Store,
    redact_url,
    validate_case_id,
)
from tracely_sdk.store._base import (
    Promotion,
    StatedRun,
    check_call_input,
    check_history,
    check_page,
)
from tracely_sdk.store._model import RUN_ID_PATTERN, normalise_tags, validate_entrypoint

__all__ = ["HTTPStore", "TOKEN_ENV"]

TOKEN_ENV = "TRACELY_TOKEN"
DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 4
MAX_RETRY_WAIT = 30.0  # the longest one Retry-After is honoured for
MAX_PAGE = 1000  # the largest page the server answers
_TRACE_ID_RE = re.compile(r"^[0-9a-fA-F]{32}$")
_RUN_ID_RE = re.compile(RUN_ID_PATTERN)
_RETRY_STATUSES = frozenset({429, 503})
_FETCH_THREADS = 8


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _parse_url(url: str) -> tuple[str, float, int]:
    """The base URL (no query, no trailing slash), the timeout and the retry count."""
    try:
        split = urllib.parse.urlsplit(url)
        split.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ConfigError(f"store URL {redact_url(url)!r} is not a valid URL: {exc}") from None
    if split.scheme.lower() not in ("http", "https") or not split.hostname:
        raise ConfigError(
            f"store URL {redact_url(url)!r}: expected http(s)://host[:port] of a tracely server"
        )
    if split.username is not None or split.password is not None:
        raise ConfigError(
            f"store URL {redact_url(url)!r}: do not put credentials in the URL; set the "
            f"server's token in {TOKEN_ENV}"
        )
    timeout, retries = DEFAULT_TIMEOUT, DEFAULT_RETRIES
    for key, value in urllib.parse.parse_qsl(split.query, keep_blank_values=True):
        if key == "timeout":
            try:
                timeout = float(value)
                if not timeout > 0:
                    raise ValueError
            except ValueError:
                raise ConfigError(
                    f"store URL {url!r}: timeout must be a positive number of seconds, got {value!r}"
                ) from None
        elif key == "retries":
            if not value.isdigit():
                raise ConfigError(
                    f"store URL {url!r}: retries must be a whole number, got {value!r}"
                )
            retries = int(value)
        else:
            raise ConfigError(
                f"store URL {url!r}: unknown option {key!r} (accepted: timeout, retries)"
            )
    base = urllib.parse.urlunsplit(
        (split.scheme.lower(), split.netloc, split.path.rstrip("/"), "", "")
    )
    return base, timeout, retries


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), None for none or
    one that is neither."""
    if not value:
        return None
    try:
        return float(_StoreRetry(retry_after_max=2**31).parse_retry_after(value.strip()))
    except InvalidHeader:
        return None


def _backoff(attempt: int) -> float:
    return float(min(5.0, 0.1 * 2**attempt) * random.uniform(0.5, 1.0))


class _StoreRetry(Retry):
    """urllib3's retries, waiting through ``sleep`` (the store's, which tests replace):
    ``Retry-After`` where the answer has a usable one (at most ``retry_after_max``), else
    exponential backoff with jitter from the first retry on."""

    # A Retry-After makes urllib3 retry these statuses (and 413 besides): only the two that
    # say "later" are retried.
    RETRY_AFTER_STATUS_CODES = _RETRY_STATUSES

    def __init__(self, *args: Any, sleep: Callable[[float], None] = time.sleep, **kw: Any):
        super().__init__(*args, **kw)
        self._wait = sleep

    def new(self, **kw: Any) -> _StoreRetry:
        fresh = super().new(**kw)
        fresh._wait = self._wait
        return fresh

    def get_retry_after(self, response: Any) -> float | None:
        wait = _retry_after(response.headers.get("Retry-After"))
        return None if wait is None else min(float(self.retry_after_max), wait)

    def sleep(self, response: Any = None) -> None:
        wait = self.get_retry_after(response) if response is not None else None
        self._wait(wait if wait is not None else _backoff(len(self.history) - 1))


def _q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


_T = TypeVar("_T")


def _case_of(data: dict[str, Any]) -> Case:
    return Case(
        id=data["id"],
        name=data["name"],
        entrypoint=data.get("entrypoint"),
        input=data["input"],
        expected_output=data.get("expected_output"),
        bundle=data["bundle"],
        source_trace_id=data.get("source_trace_id"),
        version=data["version"],
        tags=tuple(data.get("tags") or ()),
        created_at=data["created_at"],
        updated_at=data["updated_at"],
        problem=data.get("problem"),
    )


def _version_of(case_id: str, data: dict[str, Any]) -> CaseVersion:
    return CaseVersion(
        case_id=case_id,
        version=data["version"],
        input=data["input"],
        expected_output=data.get("expected_output"),
        bundle=data["bundle"],
        source_trace_id=data.get("source_trace_id"),
        created_at=data["created_at"],
        note=data.get("note"),
    )


class _Answer:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: Any, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


def _pool_manager(base: str) -> urllib3.PoolManager:
    """Connections to ``base``, through the proxy the environment names for it (``HTTP(S)_PROXY``
    less ``NO_PROXY``, as urllib would use it) unless it is on this machine."""
    split = urllib.parse.urlsplit(base)
    options: dict[str, Any] = {}
    proxy = None
    if not _is_loopback(split.hostname or ""):
        proxy = urllib.request.getproxies().get(split.scheme)
        if proxy and urllib.request.proxy_bypass(split.netloc):
            proxy = None
    if not proxy:
        return urllib3.PoolManager(**options)
    via = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if via.username is not None:
        auth = f"{urllib.parse.unquote(via.username)}:{urllib.parse.unquote(via.password or '')}"
        options["proxy_headers"] = urllib3.make_headers(proxy_basic_auth=auth)
    netloc = via.netloc.rsplit("@", 1)[-1]
    return urllib3.ProxyManager(
        urllib.parse.urlunsplit((via.scheme, netloc, "", "", "")), **options
    )


class HTTPStore(Store):
    """The store held by a tracely server at ``url`` (``http(s)://host:port``).

    ``token`` defaults to ``$TRACELY_TOKEN``; ``timeout`` (seconds per request) and ``retries``
    default to the URL's options, else 30 and 4. Constructing one sends nothing; the first
    call finds out whether the server is there.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> None:
        base, url_timeout, url_retries = _parse_url(url.strip())
        self.url = base
        self.timeout = float(timeout) if timeout is not None else url_timeout
        self.retries = int(retries) if retries is not None else url_retries
        raw = token.strip() if token is not None else resolve("token") or ""
        if raw and (not raw.isascii() or any(ord(c) < 0x21 or ord(c) == 0x7F for c in raw)):
            raise ConfigError(
                f"{TOKEN_ENV} holds characters a bearer token cannot have (spaces, control "
                "characters or non-ASCII); set it to the token alone"
            )
        self._token = raw or None
        self._closed = False
        self._sleep: Callable[[float], None] = time.sleep

    def __repr__(self) -> str:
        return f"<HTTPStore {self.url}>"

    # transport ----------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, Any] | None = None,
        idempotent: bool = True,
        what: str = "",
    ) -> Any:
        """Send one API call (retrying what may be retried); the decoded JSON answer."""
        if self._closed:
            raise StoreError(f"the store {self.url} is closed")
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        headers = {"Accept": "application/json", "User-Agent": "tracely-store-client"}
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        waits: list[float] = []

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            self._sleep(seconds)

        retries = max(0, self.retries)
        if idempotent:
            retry = _StoreRetry(
                total=retries,
                allowed_methods=None,  # every call sent here may be repeated
                status_forcelist=_RETRY_STATUSES,
                raise_on_status=False,
                retry_after_max=int(MAX_RETRY_WAIT),
                redirect=False,
                sleep=sleep,
            )
        else:
            # Only a connection that never opened is tried again: the server saw nothing.
            retry = _StoreRetry(
                total=retries, read=False, other=0, status=0, redirect=False, sleep=sleep
            )
        # Connections for this call (its retries), closed after it. Kept alive from call to
        # call, a connection to `tracely serve` waits ~40 ms for each answer: its sockets are
        # not TCP_NODELAY, so an answer's body waits for this side's delayed ACK of its head.
        connections = _pool_manager(self.url)
        try:
            response = connections.request(
                method,
                url,
                body=data,
                headers=headers,
                timeout=urllib3.Timeout(connect=self.timeout, read=self.timeout),
                retries=retry,
                redirect=False,
            )
        except MaxRetryError as exc:
            self._unreachable(exc.reason, attempts=len(waits) + 1)
        except HTTPError as exc:
            self._unreachable(exc, attempts=len(waits) + 1)
        finally:
            connections.clear()
        answer = _Answer(response.status, response.headers, response.data)
        return self._decode(answer, method, path, what, attempts=len(waits) + 1)

    def _unreachable(self, reason: Any, *, attempts: int) -> NoReturn:
        if isinstance(reason, NewConnectionError):
            problem = str(reason).split(": ", 1)[-1]  # without the connection object's repr
        elif isinstance(reason, (_Timeout, TimeoutError)):
            problem = f"no answer within {self.timeout:g}s"
        else:
            problem = str(reason) or type(reason).__name__
        tries = f" (tried {attempts} times)" if attempts > 1 else ""
        raise StoreError(
            f"cannot reach the tracely server at {self.url}: {problem}{tries}; check that "
            "`tracely serve` is running there and that the store URL (--store or "
            "TRACELY_STORE) names it"
        )

    def _decode(self, answer: _Answer, method: str, path: str, what: str, *, attempts: int) -> Any:
        status = answer.status
        if 200 <= status < 300:
            if status == 204 or not answer.body:
                return None
            try:
                return orjson.loads(answer.body)
            except orjson.JSONDecodeError:
                raise StoreError(
                    f"{self.url} answered {method} {path} with something that is not JSON; is "
                    "it a tracely server?"
                ) from None
        code, message, detail = self._error_of(answer)
        if status == 401:
            if self._token is None:
                raise StoreError(
                    f"the tracely server at {self.url} needs a token: set {TOKEN_ENV} to a "
                    "token the server accepts"
                )
            raise StoreError(
                f"the tracely server at {self.url} does not accept the token in {TOKEN_ENV}: "
                "it is wrong or was revoked; set the right one"
            )
        if status == 403:
            raise StoreError(
                f"the token in {TOKEN_ENV} may not do this on {self.url} ({message}); use a "
                "token with that scope"
            )
        if status == 404:
            if message.startswith("no such resource"):
                raise StoreError(
                    f"{self.url} has no {path.split('?', 1)[0]}: is the URL that of a tracely "
                    "server (without a path it does not serve)?"
                )
            raise NotFound(f"{message or what + ' not found'} on {self.url}")
        if status == 409:
            error = Conflict(message or f"{what} conflicts with what the server holds")
            error.detail = detail  # type: ignore[attr-defined]
            raise error
        if status == 400 or status == 422:
            if code == "invalid":
                raise InvalidCase(message)
            raise StoreError(f"the tracely server at {self.url} refused the request: {message}")
        if 300 <= status < 400:
            where = answer.headers.get("Location", "?")
            raise StoreError(
                f"{self.url} redirects to {redact_url(where)}; use that URL as the store"
            )
        if status == 413:
            raise StoreError(f"the tracely server at {self.url} refused it as too large: {message}")
        if status in _RETRY_STATUSES:
            tries = f" (tried {attempts} times)" if attempts > 1 else ""
            busy = "busy" if status == 429 else "unavailable"
            raise StoreError(
                f"the tracely server at {self.url} is {busy}{tries}: {message or status}; try "
                "again later"
            )
        raise StoreError(
            f"the tracely server at {self.url} failed on {method} {path} with HTTP {status}: "
            f"{message or 'no message'}"
        )

    @staticmethod
    def _error_of(answer: _Answer) -> tuple[str, str, Any]:
        try:
            doc = orjson.loads(answer.body) if answer.body else None
        except orjson.JSONDecodeError:
            doc = None
        error = doc.get("error") if isinstance(doc, dict) else None
        if not isinstance(error, dict):
            text = answer.body[:200].decode("utf-8", "replace").strip()
            return "", " ".join(text.split()), None
        return str(error.get("code") or ""), str(error.get("message") or ""), error.get("detail")

    # mapping answers back ------------------------------------------------------------------

    def _malformed(self, what: str, exc: Exception) -> StoreError:
        return StoreError(f"{self.url} answered with a malformed {what}: {exc}")

    def _decoded(self, what: str, build: Callable[[dict[str, Any]], _T], data: Any) -> _T:
        """``build(data)``, or a StoreError saying what of the answer is malformed."""
        try:
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            return build(data)
        except KeyError as exc:
            raise self._malformed(what, ValueError(f"it has no {exc.args[0]!r}")) from None
        except (ValueError, TypeError) as exc:
            raise self._malformed(what, exc) from None

    def _recording(self, data: Any) -> Recording:
        return self._decoded("recording", Recording.from_dict, data)

    def _case(self, data: Any) -> Case:
        return self._decoded("case", _case_of, data)

    def _version(self, case_id: str, data: Any) -> CaseVersion:
        return self._decoded("case version", lambda d: _version_of(case_id, d), data)

    def _field(self, doc: Any, key: str) -> Any:
        if not isinstance(doc, dict) or key not in doc:
            raise self._malformed("answer", ValueError(f"it has no {key!r}"))
        return doc[key]

    def _items(self, doc: Any, key: str, what: str) -> list[Any]:
        items = self._field(doc, key)
        if not isinstance(items, list):
            raise self._malformed(what, TypeError(f"{key} is not a list"))
        return items

    def _trace_id(self, trace_id: Any) -> str:
        """``trace_id``, or NotFound when the server could hold no such trace (nothing sent)."""
        if not isinstance(trace_id, str) or not _TRACE_ID_RE.fullmatch(trace_id):
            raise NotFound(
                f"no recording of trace {trace_id!r} on {self.url} (the server holds only "
                "32-hex-digit trace ids)"
            )
        return trace_id

    def _case_path(self, case_id: Any) -> str:
        """``/api/cases/{case_id}``, or NotFound when it is no case id (nothing is sent)."""
        try:
            validate_case_id(case_id if isinstance(case_id, str) else "")
        except InvalidCase:
            raise NotFound(f"no case {case_id!r} on {self.url}") from None
        return f"/api/cases/{_q(case_id)}"

    # recordings ---------------------------------------------------------------------------

    def put_recording(self, recording: Recording) -> bool:
        """Store ``recording`` on the server. Retried when the answer is lost, which is safe
        (the server ignores the same recording again), though the retry then reports False."""
        doc = self._request("POST", "/api/recordings", recording.to_dict(), what="recording")
        return bool(self._field(doc, "stored"))

    def get_recording(self, trace_id: str) -> Recording:
        path = f"/api/traces/{_q(self._trace_id(trace_id))}"
        doc = self._request("GET", path, what=f"trace {trace_id}")
        return self._recording(doc)

    def list_recordings(
        self,
        limit: int = 50,
        offset: int = 0,
        service: str | None = None,
        agent: str | None = None,
    ) -> list[Recording]:
        check_page(limit, offset)
        summaries: list[Any] = []
        while len(summaries) < limit:
            page = min(MAX_PAGE, limit - len(summaries))
            doc = self._request(
                "GET",
                "/api/traces",
                query={
                    "limit": page,
                    "offset": offset + len(summaries),
                    "service": service,
                    "agent": agent,
                },
                what="traces",
            )
            items = self._items(doc, "traces", "trace list")
            summaries.extend(items)
            if len(items) < page:
                break
        ids = [self._field(s, "trace_id") for s in summaries]
        # The listing carries no bundles; each recording is fetched whole.
        if len(ids) <= 1:
            return [self.get_recording(t) for t in ids]
        with ThreadPoolExecutor(max_workers=min(_FETCH_THREADS, len(ids))) as pool:
            return list(pool.map(self.get_recording, ids))

    # cases --------------------------------------------------------------------------------

    def promote(
        self,
        trace_id: str,
        *,
        case_id: str | None = None,
        name: str,
        entrypoint: str | None = None,
        tags: Iterable[str] = (),
        stated: StatedRun | None = None,
    ) -> Case:
        tags = tuple(tags) if not isinstance(tags, (str, bytes)) else tags
        promotion = Promotion(trace_id, name, case_id, entrypoint, tags, stated)  # type: ignore[arg-type]
        if stated is not None:  # POST /api/cases takes no stated run; /api/promotions does
            return self.promote_many([promotion])[0]
        body = self._promotion_body(promotion)
        # Not repeated after a lost answer: a second promotion would make a second case.
        doc = self._request("POST", "/api/cases", body, idempotent=False, what=f"trace {trace_id}")
        return self._case(doc)

    def _promotion_body(self, p: Promotion) -> dict[str, Any]:
        # The same checks, in the same words, as every other backend, before anything is sent.
        if not isinstance(p.name, str) or not p.name.strip():
            raise InvalidCase(f"a case needs a non-empty name, got {p.name!r}")
        validate_entrypoint(p.entrypoint)
        tag_list = list(normalise_tags(p.tags))
        if p.case_id is not None:
            validate_case_id(p.case_id)
        body: dict[str, Any] = {"trace_id": self._trace_id(p.trace_id), "name": p.name}
        body["tags"] = tag_list
        if p.case_id is not None:
            body["id"] = p.case_id
        if p.entrypoint is not None:
            body["entrypoint"] = p.entrypoint
        if p.stated is not None:
            check_call_input(p.stated.input)
            body["stated"] = p.stated.to_dict()
        return body

    def promote_many(self, promotions: Sequence[Promotion]) -> list[Case]:
        bodies = [self._promotion_body(p) for p in promotions]
        if not bodies:
            return []
        # One request, one transaction on the server; not repeated after a lost answer.
        doc = self._request(
            "POST",
            "/api/promotions",
            {"promotions": bodies},
            idempotent=False,
            what=f"{len(bodies)} promotion{'s' if len(bodies) != 1 else ''}",
        )
        items = self._field(doc, "cases")
        if not isinstance(items, list) or len(items) != len(bodies):
            raise self._malformed("promotions", TypeError("cases is not one case a promotion"))
        return [self._case(item) for item in items]

    def get_case(self, case_id: str) -> Case:
        return self._case(self._request("GET", self._case_path(case_id), what=f"case {case_id}"))

    def list_cases(
        self, tag: str | None = None, *, limit: int | None = None, offset: int = 0
    ) -> list[Case]:
        cases = self._all_cases(tag)
        start = max(0, offset)
        return cases[start:] if limit is None else cases[start : start + max(0, limit)]

    def _all_cases(self, tag: str | None) -> list[Case]:
        if tag is not None:
            try:
                normalise_tags([tag])
            except InvalidCase:
                return []  # no case can carry such a tag
        doc = self._request("GET", "/api/cases", query={"tag": tag}, what="cases")
        return [self._case(c) for c in self._items(doc, "cases", "case list")]

    def case_history(self, case_id: str) -> list[CaseVersion]:
        doc = self._request("GET", self._case_path(case_id) + "/versions", what=f"case {case_id}")
        items = self._items(doc, "versions", "version list")
        return sorted((self._version(case_id, v) for v in items), key=lambda v: v.version)

    def recapture(self, case_id: str, trace_id: str, *, note: str | None = None) -> Case:
        """Re-record ``case_id`` from ``trace_id``. Safe to repeat: recapturing from the trace
        the case already holds changes nothing, so a lost answer is retried."""
        if note is not None and not isinstance(note, str):
            raise ValueError("note must be a string")
        path = self._case_path(case_id) + "/recapture"
        body: dict[str, Any] = {"trace_id": self._trace_id(trace_id)}
        if note is not None:
            body["note"] = note
        doc = self._request("POST", path, body, what=f"case {case_id}")
        return self._case(doc)

    def update_case(
        self,
        case_id: str,
        *,
        name: str | None = None,
        tags: Iterable[str] | None = None,
        entrypoint: str | None = None,
    ) -> Case:
        body: dict[str, Any] = {}
        if name is not None:
            body["name"] = name
        if tags is not None:
            body["tags"] = list(normalise_tags(tags))
        if entrypoint is not None:
            validate_entrypoint(entrypoint or None)
            body["entrypoint"] = entrypoint
        doc = self._request("PATCH", self._case_path(case_id), body, what=f"case {case_id}")
        return self._case(doc)

    def delete_case(self, case_id: str) -> None:
        self._request("DELETE", self._case_path(case_id), what=f"case {case_id}")

    def put_case(self, case: Case, history: Sequence[CaseVersion]) -> Case:
        ordered = check_history(case, history)  # the case ids of the versions are not sent
        body = {"case": case.to_dict(), "history": [v.to_dict() for v in ordered]}
        doc = self._request("PUT", f"/api/cases/{_q(case.id)}", body, what=f"case {case.id}")
        return self._case(doc)

    # replay runs --------------------------------------------------------------------------

    def _run(self, data: Any) -> Run:
        return self._decoded("run", Run.from_dict, data)

    def save_run(self, run: Run) -> None:
        """Keep ``run`` on the server. Retried when the answer is lost, which is safe: the
        same run again changes nothing."""
        self._request("POST", "/api/runs", run.to_dict(), what=f"run {run.id}")

    def get_run(self, run_id: str) -> Run:
        if not isinstance(run_id, str) or not _RUN_ID_RE.fullmatch(run_id):
            raise NotFound(f"no run {run_id!r} on {self.url} (run ids are 16 hexadecimal digits)")
        return self._run(self._request("GET", f"/api/runs/{_q(run_id)}", what=f"run {run_id}"))

    def list_runs(self, limit: int = 20, offset: int = 0, trace_id: str | None = None) -> list[Run]:
        check_page(limit, offset)
        if trace_id is not None and not _TRACE_ID_RE.fullmatch(trace_id):
            return []  # no replay trace has such an id
        runs: list[Run] = []
        while len(runs) < limit:
            page = min(MAX_PAGE, limit - len(runs))
            doc = self._request(
                "GET",
                "/api/runs",
                query={"limit": page, "offset": offset + len(runs), "trace_id": trace_id},
                what="runs",
            )
            items = self._items(doc, "runs", "run list")
            runs.extend(self._run(item) for item in items)
            if len(items) < page:
                break
        return runs

    # lifecycle ----------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """The server's ``/healthz`` answer (raises StoreError when it is not healthy)."""
        doc = self._request("GET", "/healthz", what="health")
        return doc if isinstance(doc, dict) else {}

    def close(self) -> None:
        self._closed = True
