"""Running scenarios against a live service: turns over HTTP, checks, one verdict each.

A scenario's turns are sent in order to the service, one conversation per attempt. Each turn
carries a W3C ``traceparent`` with a fresh trace id, so the spans the service exports for that
turn form one trace; once the conversation is over, each turn's recording is fetched from the
store (the tracely server the service exports to, or a store it shares) and its trace checks
are evaluated. Verdicts are the replay gate's:

- PASS: every check of every turn held (with ``repeat``, in at least the threshold's share).
- FAIL: a check did not hold; the reason says which turn and check, what was expected and
  what came back.
- INCOMPLETE: trace checks could not be evaluated (no store configured, or the turn's trace
  did not arrive in time). Never a pass.
- ERRORED: the service could not be reached, did not answer in full within the turn's
  timeout, answered with an HTTP error or a redirect to an origin the scenario does not allow,
  or its response has no reply (or no value to save) where the scenario says.

A turn is one exchange, bounded as a whole by ``target.timeout_s``: redirects (within the
target's origin; to another only when ``allow_redirects_to`` names it, and never with the
scenario's headers) and a streamed reply (``text/event-stream``, read to its end) included.
Its latency is that of the whole turn.
"""

from __future__ import annotations

import base64
import http.client
import json
import secrets
import socket
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from tracely_sdk._runner import ERRORED, FAIL, INCOMPLETE, PASS, CaseResult
from tracely_sdk.errors import NotFound, StoreError
from tracely_sdk.scenarios._checks import (
    Failure,
    NotEvaluated,
    TraceCalls,
    check_budget,
    check_reply,
    check_trace,
)
from tracely_sdk.scenarios._jsonpath import MISSING
from tracely_sdk.scenarios._spec import (
    Scenario,
    ScenarioError,
    Target,
    TemplateError,
    Turn,
    fill,
    fill_header,
    fill_path,
)

__all__ = ["TraceSource", "run_scenario", "run_scenarios"]

_MAX_RESPONSE: Final = 10 << 20
# Deeper JSON is refused: checks, reports and the JSON writer all walk it.
_MAX_DEPTH: Final = 64
_MAX_REDIRECTS: Final = 5
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_USER_AGENT: Final = "tracely-scenarios"
SKIPPED: Final = "not evaluated: --no-trace-checks"


class TraceSource:
    """Where the service's traces land: a store, polled (bounded) for a turn's recording."""

    def __init__(self, store: Any, *, timeout: float = 30.0, describe: str = "the store") -> None:
        self.store = store
        self.timeout = timeout
        self.describe = describe

    def fetch(self, trace_id: str, deadline: float) -> Any | None:
        """The recording of ``trace_id``, waiting until ``deadline`` (monotonic) at most."""
        pause = 0.05
        while True:
            try:
                return self.store.get_recording(trace_id)
            except NotFound:
                pass
            now = time.monotonic()
            if now >= deadline:
                return None
            # The server assembles a trace once it has gone quiet: polling is the only signal
            # a remote store gives, so back off to spare it.
            time.sleep(min(pause, deadline - now))
            pause = min(pause * 2, 1.0)


@dataclass
class TurnOutcome:
    index: int
    user: str
    trace_id: str
    reply: Any = None
    status: int | None = None
    latency_ms: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    error: str | None = None
    trace: str = "none"  # none | passed | failed | not evaluated: <why>
    calls: dict[str, Any] | None = None
    unread: list[NotEvaluated] = field(default_factory=list)  # checks the trace cannot decide

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.index,
            "user": self.user,
            "reply": self.reply if self.reply is not MISSING else None,
            "status": self.status,
            "latency_ms": round(self.latency_ms, 1),
            "trace_id": self.trace_id,
            "failures": [f.to_dict() for f in self.failures],
            "error": self.error,
            "trace_checks": self.trace,
            "not_evaluated": [u.to_dict() for u in self.unread],
            "calls": self.calls,
        }


class _Errored(Exception):
    """The turn could not be completed (unreachable, timed out, an HTTP error, a redirect that
    may not be followed, a response tracely cannot read): the scenario is ERRORED, not FAIL."""


def _origin(url: str) -> str:
    """``scheme://host:port`` of ``url``, the port written out, for comparing origins."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise _Errored(f"{url!r} is not a URL to send a request to: bad port") from None
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


def _parse_json(text: str, url: str) -> Any:
    """The response as JSON (or as text when it is not JSON), no deeper than the reports go."""
    try:
        value: Any = json.loads(text)
    except RecursionError:
        raise _Errored(f"{url} sent JSON nested more than {_MAX_DEPTH} levels deep") from None
    except ValueError:
        return text
    # Iterative, so a deep value cannot exhaust the stack of the check or the report writers.
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > _MAX_DEPTH:
            raise _Errored(f"{url} sent JSON nested more than {_MAX_DEPTH} levels deep")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return value


class _Watchdog:
    """Shuts the connection down at the turn's deadline: a socket timeout bounds each read,
    not their sum, so a service sending a byte a second would otherwise hold the turn."""

    def __init__(self, connection: http.client.HTTPConnection, deadline: float) -> None:
        self.connection = connection
        self.fired = False
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        sock = self.connection.sock
        if sock is not None:
            try:
                # The plain socket's shutdown (not TLS's): a blocked read returns at once.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        self.connection.close()


def _events(response: http.client.HTTPResponse, url: str) -> list[str]:
    """The data of each server-sent event, read to the end of the stream (or ``[DONE]``)."""
    events: list[str] = []
    data: list[str] = []
    total = 0
    while True:
        line = response.readline(_MAX_RESPONSE + 1)
        total += len(line)
        if total > _MAX_RESPONSE:
            raise _Errored(f"{url} streamed more than {_MAX_RESPONSE >> 20} MiB")
        if not line or not line.strip(b"\r\n"):
            if data:
                events.append("\n".join(data))
                data = []
                if events[-1].strip() == "[DONE]":  # OpenAI's end of stream
                    events.pop()
                    return events
            if not line:
                return events
            continue
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        field, _, value = text.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)


def _proxy(
    parts: urllib.parse.SplitResult,
) -> tuple[urllib.parse.SplitResult, dict[str, str]] | None:
    """The proxy the environment names for this URL (``HTTP(S)_PROXY``, less ``NO_PROXY``),
    as urllib would use it, and the header that carries its credentials."""
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return None
    via = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    try:
        usable = via.scheme == "http" and bool(via.hostname) and via.port != 0
    except ValueError:  # a port that is no number
        usable = False
    if not usable:
        raise _Errored(f"the {parts.scheme} proxy {via.hostname} is not an http://HOST:PORT proxy")
    authorization: dict[str, str] = {}
    if via.username is not None:
        token = f"{urllib.parse.unquote(via.username)}:{urllib.parse.unquote(via.password or '')}"
        authorization["Proxy-Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
    return via, authorization


@dataclass
class _Answer:
    status: int
    response: Any  # the parsed body; for a stream, the list of its events' data
    stream: bool


def _exchange(
    method: str, url: str, data: bytes | None, headers: dict[str, str], deadline: float
) -> tuple[int, str | None, _Answer | None]:
    """One request: (status, redirect location, answer), reading the whole answer by
    ``deadline``."""
    parts = urllib.parse.urlsplit(url)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    proxy = _proxy(parts)
    if proxy is None:
        connection = cls(parts.hostname or "", parts.port, timeout=remaining)
    else:
        via, authorization = proxy
        connection = cls(via.hostname or "", via.port or 80, timeout=remaining)
        if parts.scheme == "https":  # a tunnel: the proxy sees the host, never the request
            connection.set_tunnel(parts.hostname or "", parts.port, headers=authorization)
        else:
            target, headers = url, {**headers, **authorization}
    with _Watchdog(connection, deadline) as watchdog:
        try:
            connection.request(method, target, body=data, headers=headers)
            response = connection.getresponse()
            status = response.status
            if status in _REDIRECTS:
                return status, response.getheader("Location") or "", None
            if status >= 300:
                detail = response.read(500).decode("utf-8", "replace").strip()
                raise _Errored(f"{url} answered HTTP {status}" + (f": {detail}" if detail else ""))
            kind = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
            if kind == "text/event-stream":
                events = [_parse_json(e, url) for e in _events(response, url)]
                return status, None, _Answer(status, events, stream=True)
            raw = response.read(_MAX_RESPONSE + 1)
        except ValueError as exc:  # a header or path http.client will not send as it is
            raise _Errored(f"cannot send the request to {url}: {exc}") from exc
        except (OSError, http.client.HTTPException) as exc:
            # A socket timeout is the deadline too: each read is given what is left of it.
            if watchdog.fired or isinstance(exc, TimeoutError):
                raise TimeoutError from exc
            raise _Errored(
                f"cannot reach {url}: {getattr(exc, 'reason', exc) or type(exc).__name__}"
            ) from exc
        if watchdog.fired:
            raise TimeoutError
    if len(raw) > _MAX_RESPONSE:
        raise _Errored(f"{url} sent more than {_MAX_RESPONSE >> 20} MiB")
    return status, None, _Answer(status, _parse_json(raw.decode("utf-8", "replace"), url), False)


def _merged(base: dict[str, str], own: dict[str, str]) -> dict[str, str]:
    """``base`` with ``own`` over it, header names compared as HTTP does, regardless of case."""
    mine = {name.lower() for name in own}
    return {**{k: v for k, v in base.items() if k.lower() not in mine}, **own}


def _send(
    target: Target, path: str, body: Any, headers: dict[str, str], own: dict[str, str]
) -> tuple[_Answer, float]:
    """Send one turn and read its whole answer, following redirects, within the target's
    timeout; ``own`` are the scenario's headers (credentials), sent to its origin only."""
    url = (target.url or "") + path
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise _Errored(f"{url!r} is not an http(s) URL")
    home = _origin(url)
    allowed = {_origin(o) for o in target.redirect_origins}
    method = target.method
    data = None if method == "GET" else json.dumps(body).encode()
    sent = own
    started = time.monotonic()
    deadline = started + target.timeout
    try:
        for _ in range(_MAX_REDIRECTS + 1):
            base = {**headers, "Content-Type": "application/json"} if data is not None else headers
            request_headers = _merged(base, sent)
            status, location, answer = _exchange(method, url, data, request_headers, deadline)
            if answer is not None:
                return answer, (time.monotonic() - started) * 1000
            following = urllib.parse.urljoin(url, location or "")
            if not location or urllib.parse.urlsplit(following).scheme not in ("http", "https"):
                raise _Errored(f"{url} answered HTTP {status} with no http(s) Location to follow")
            there = _origin(following)
            if there != home:
                if there not in allowed:
                    raise _Errored(
                        f"{url} redirected (HTTP {status}) to another origin, {there}; not "
                        "followed: allow it with target.allow_redirects_to (the scenario's "
                        "headers are never sent there)"
                    )
                sent = {}  # credentials never cross origins
            if status == 303 or (status in (301, 302) and method == "POST"):
                method, data = "GET", None
            url = following
    except TimeoutError:
        raise _Errored(
            f"{url} did not answer in full within {target.timeout:g} s (target.timeout_s, "
            "for the whole turn)"
        ) from None
    raise _Errored(f"{url}: more than {_MAX_REDIRECTS} redirects")


def _traceparent() -> tuple[str, str]:
    trace_id = secrets.token_hex(16)
    return trace_id, f"00-{trace_id}-{secrets.token_hex(8)}-01"


def _reply(target: Target, answer: _Answer) -> Any:
    """The reply in an answer: at ``target.reply`` in a JSON body; for a stream, its events'
    pieces (at ``target.stream_reply`` in each, or each event's data) joined."""
    if not answer.stream:
        response = answer.response
        return response if target.reply.text == "$" else target.reply.get(response)
    pieces: list[str] = []
    for event in answer.response:
        piece = event if target.stream_reply is None else target.stream_reply.get(event)
        if isinstance(piece, str):
            pieces.append(piece)
        elif piece is not MISSING and piece is not None and target.stream_reply is None:
            pieces.append(json.dumps(piece))
    return "".join(pieces) if pieces else MISSING


def _turn_request(
    target: Target, turn: Turn, values: dict[str, Any], where: str
) -> tuple[str, Any, dict[str, str]]:
    """The turn's path, body and the scenario's headers, filled with the conversation's values."""
    path = fill_path(turn.path if turn.path is not None else target.path, values)
    body = fill(turn.body if turn.body is not MISSING else target.body, values)
    own = {
        name: fill_header(value, values, f"{where}: headers.{name}")
        for name, value in {**target.headers, **turn.headers}.items()
    }
    return path, body, own


def _attempt(
    scenario: Scenario, target: Target, source: TraceSource | None, check_traces: bool
) -> list[TurnOutcome]:
    messages: list[dict[str, str]] = []
    # The runner's values, then those turns save (which may replace the conversation id).
    values: dict[str, Any] = {
        "conversation_id": f"tracely-{scenario.id}-{uuid.uuid4().hex[:12]}",
        "model": target.model or "",
    }
    outcomes: list[TurnOutcome] = []
    for index, turn in enumerate(scenario.turns, start=1):
        trace_id, traceparent = _traceparent()
        outcome = TurnOutcome(index, turn.user, trace_id)
        outcomes.append(outcome)
        messages.append({"role": "user", "content": turn.user})
        values.update(message=turn.user, messages=list(messages), turn=index)
        headers = {
            "Accept": "application/json, text/event-stream",
            "User-Agent": _USER_AGENT,
            "traceparent": traceparent,
            "tracestate": f"tracely=t{index}",
        }
        try:
            path, body, own = _turn_request(target, turn, values, scenario.source or "<scenario>")
            answer, outcome.latency_ms = _send(target, path, body, headers, own)
        except (_Errored, TemplateError) as exc:
            outcome.error = str(exc)
            return outcomes
        outcome.status = answer.status
        response = answer.response
        reply = _reply(target, answer)
        if reply is MISSING:
            where = target.stream_reply if answer.stream else target.reply
            what = "stream has no reply in any event" if answer.stream else "response has no reply"
            outcome.error = f"the {what} at {where or 'data'}: {_clip(response)}"
            return outcomes
        outcome.reply = reply
        messages.append(
            {"role": "assistant", "content": reply if isinstance(reply, str) else json.dumps(reply)}
        )
        for name, at in turn.save.items():
            saved = at.get(response)
            if saved is MISSING:
                outcome.error = (
                    f"the response has no value at {at} to save as {name}: {_clip(response)}"
                )
                return outcomes
            values[name] = saved
        for check in turn.reply_checks:
            failure = check_reply(check, reply, response, outcome.latency_ms)
            if failure is not None:
                outcome.failures.append(failure)
    _trace_checks(scenario, outcomes, source, check_traces)
    return outcomes


def _trace_checks(
    scenario: Scenario, outcomes: list[TurnOutcome], source: TraceSource | None, check_traces: bool
) -> None:
    budget = scenario.max_tokens is not None and len(outcomes) == len(scenario.turns)
    wanted = [
        (o, t) for o, t in zip(outcomes, scenario.turns, strict=False) if t.trace_checks or budget
    ]
    if not wanted:
        return
    if not check_traces:
        for o, _ in wanted:
            o.trace = SKIPPED
        return
    if source is None:
        for o, _ in wanted:
            o.trace = (
                "not evaluated: no store to read the service's traces from "
                "(--store URL or TRACELY_STORE, e.g. the tracely server the service exports to)"
            )
        return
    # One deadline for the whole conversation: the turns' traces were assembled meanwhile.
    deadline = time.monotonic() + source.timeout
    complete = scenario.assume_complete or bool(scenario.span_format)
    read: list[TraceCalls] = []
    for outcome, turn in wanted:
        try:
            recording = source.fetch(outcome.trace_id, deadline)
        except StoreError as exc:
            outcome.trace = f"not evaluated: {source.describe} failed: {exc}"
            continue
        if recording is None:
            outcome.trace = (
                f"not evaluated: no span of trace {outcome.trace_id} reached "
                f"{source.describe} within {source.timeout:g} s, though the service answered; "
                "does it export its spans there (OTEL_EXPORTER_OTLP_ENDPOINT), and continue the "
                "traceparent it is sent? (A trace with no agent, tool or LLM span is recorded "
                "only if its spans keep the tracestate the turn was sent with, as the W3C "
                "propagator does.)"
            )
            continue
        calls = TraceCalls.of(recording.bundle, recording.status)
        read.append(calls)
        outcome.calls = calls.to_dict()
        results = [check_trace(c, calls, assume_complete=complete) for c in turn.trace_checks]
        _judged(outcome, results)
    if budget and scenario.max_tokens is not None and outcomes:
        last = outcomes[-1]
        if len(read) == len(outcomes):
            what = f"scenario max_tokens {scenario.max_tokens}"
            result = check_budget(what, scenario.max_tokens, read, assume_complete=complete)
            _judged(last, [result])
        elif not last.trace.startswith("not evaluated"):
            last.trace = "not evaluated: the scenario's max_tokens needs every turn's trace"


def _judged(outcome: TurnOutcome, results: Sequence[Failure | NotEvaluated | None]) -> None:
    """Record trace check results on a turn: failed, else not evaluated, else passed."""
    if not results:
        return
    failed = [r for r in results if isinstance(r, Failure)]
    outcome.failures.extend(failed)
    outcome.unread.extend(r for r in results if isinstance(r, NotEvaluated))
    if failed or outcome.trace == "failed":
        outcome.trace = "failed"
    elif outcome.unread:
        outcome.trace = "not evaluated: " + "; ".join(f"{u.check}: {u.why}" for u in outcome.unread)
    else:
        outcome.trace = "passed"


def _clip(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _attempt_verdict(outcomes: Sequence[TurnOutcome]) -> tuple[str, list[str]]:
    reasons: list[str] = []
    for o in outcomes:
        if o.error is not None:
            return ERRORED, [f"turn {o.index}: {o.error}"]
        reasons.extend(f"turn {o.index}: {f}" for f in o.failures)
    if reasons:
        # What could not be decided is said too: fixing the failure leaves it to settle.
        reasons.extend(f"turn {o.index}: {u}" for o in outcomes for u in o.unread)
        return FAIL, reasons
    unchecked = [
        f"turn {o.index}: trace checks {o.trace}"
        for o in outcomes
        if o.trace.startswith("not evaluated")
    ]
    if any(o.trace.startswith("not evaluated") and o.trace != SKIPPED for o in outcomes):
        return INCOMPLETE, unchecked
    # Skipped on request: the verdict is the reply checks', and the report still says so.
    return PASS, unchecked


def run_scenario(
    scenario: Scenario,
    *,
    target_url: str | None = None,
    traces: TraceSource | None = None,
    check_traces: bool = True,
    repeat: int | None = None,
) -> CaseResult:
    """Run ``scenario`` (``repeat`` times, default its own) and return its verdict."""
    target = scenario.target.with_url(target_url)
    if target.url is None:
        raise ScenarioError(
            f"{scenario.source}: no target URL: give --target URL or `target.url` in the file"
        )
    runs = repeat or scenario.repeat
    started = time.perf_counter()
    attempts: list[tuple[str, list[str], list[TurnOutcome]]] = []
    for _ in range(runs):
        outcomes = _attempt(scenario, target, traces, check_traces)
        verdict, reasons = _attempt_verdict(outcomes)
        attempts.append((verdict, reasons, outcomes))
    passed = sum(1 for v, _, _ in attempts if v == PASS)
    if runs == 1:
        verdict, reasons, _ = attempts[0]
    elif passed / runs >= scenario.pass_threshold:
        verdict = PASS
        reasons = (
            []
            if passed == runs
            else [f"passed {passed} of {runs} runs (threshold {scenario.pass_threshold:g})"]
        )
    else:
        verdicts = [v for v, _, _ in attempts if v != PASS]
        verdict = ERRORED if ERRORED in verdicts else verdicts[0]
        first = next(r for v, r, _ in attempts if v != PASS)
        reasons = [
            f"passed {passed} of {runs} runs (threshold {scenario.pass_threshold:g})",
            *first,
        ]
    last = attempts[-1][2]
    return CaseResult(
        case_id=scenario.id,
        version=None,
        name=scenario.name,
        verdict=verdict,  # type: ignore[arg-type]
        reasons=reasons,
        output=[o.reply for o in last if o.reply is not MISSING],
        duration=time.perf_counter() - started,
        trace_id=last[0].trace_id if last else None,
        entrypoint=(target.url or "") + target.path,
        report={
            "kind": "scenario",
            "source": scenario.source,
            "tags": list(scenario.tags),
            "repeat": runs,
            "passed_runs": passed,
            "pass_threshold": scenario.pass_threshold,
            "attempts": [
                {"verdict": v, "reasons": r, "turns": [o.to_dict() for o in outs]}
                for v, r, outs in attempts
            ],
        },
    )


def run_scenarios(
    scenarios: Sequence[Scenario],
    *,
    target_url: str | None = None,
    traces: TraceSource | None = None,
    check_traces: bool = True,
    repeat: int | None = None,
    jobs: int = 1,
    progress: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Run every scenario, ``jobs`` at a time (they only wait on the network); results in order."""

    def one(scenario: Scenario) -> CaseResult:
        result = run_scenario(
            scenario,
            target_url=target_url,
            traces=traces,
            check_traces=check_traces,
            repeat=repeat,
        )
        if progress is not None:
            progress(result)
        return result

    if jobs <= 1 or len(scenarios) <= 1:
        return [one(s) for s in scenarios]
    with ThreadPoolExecutor(max_workers=min(jobs, len(scenarios))) as pool:
        return list(pool.map(one, scenarios))
