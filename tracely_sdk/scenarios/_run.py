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
- ERRORED: the service could not be reached, timed out, or answered with an HTTP error, or
  its response has no reply where the scenario says.
"""

from __future__ import annotations

import json
import secrets
import time
import urllib.error
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
from tracely_sdk.scenarios._spec import Scenario, ScenarioError, Target, expand_env, fill

__all__ = ["TraceSource", "run_scenario", "run_scenarios"]

_MAX_RESPONSE: Final = 10 << 20
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


class _Transport(Exception):
    """The turn could not be completed over HTTP: the scenario is ERRORED, not FAIL."""


def _send(target: Target, body: Any, headers: dict[str, str]) -> tuple[int, Any, float]:
    url = (target.url or "") + target.path
    data = None if target.method == "GET" else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=target.method)
    request.add_header("Content-Type", "application/json")
    request.add_header("Accept", "application/json")
    request.add_header("User-Agent", _USER_AGENT)
    for name, value in headers.items():
        request.add_header(name, value)
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=target.timeout) as response:
            raw = response.read(_MAX_RESPONSE + 1)
            status = response.status
    except urllib.error.HTTPError as exc:
        detail = exc.read(500).decode("utf-8", "replace").strip()
        raise _Transport(
            f"{url} answered HTTP {exc.code}" + (f": {detail}" if detail else "")
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Transport(f"cannot reach {url}: {reason}") from exc
    latency = (time.perf_counter() - started) * 1000
    if len(raw) > _MAX_RESPONSE:
        raise _Transport(f"{url} sent more than {_MAX_RESPONSE >> 20} MiB")
    text = raw.decode("utf-8", "replace")
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        parsed = text
    return status, parsed, latency


def _traceparent() -> tuple[str, str]:
    trace_id = secrets.token_hex(16)
    return trace_id, f"00-{trace_id}-{secrets.token_hex(8)}-01"


def _attempt(
    scenario: Scenario, target: Target, source: TraceSource | None, check_traces: bool
) -> list[TurnOutcome]:
    conversation_id = f"tracely-{scenario.id}-{uuid.uuid4().hex[:12]}"
    messages: list[dict[str, str]] = []
    headers = {
        name: expand_env(value, f"{scenario.source}: target.headers.{name}")
        for name, value in target.headers.items()
    }
    outcomes: list[TurnOutcome] = []
    for index, turn in enumerate(scenario.turns, start=1):
        trace_id, traceparent = _traceparent()
        outcome = TurnOutcome(index, turn.user, trace_id)
        outcomes.append(outcome)
        messages.append({"role": "user", "content": turn.user})
        values = {
            "message": turn.user,
            "conversation_id": conversation_id,
            "messages": list(messages),
            "model": target.model or "",
            "turn": index,
        }
        turn_headers = dict(headers, traceparent=traceparent, tracestate=f"tracely=t{index}")
        try:
            outcome.status, response, outcome.latency_ms = _send(
                target, fill(target.body, values), turn_headers
            )
        except _Transport as exc:
            outcome.error = str(exc)
            return outcomes
        reply = response if target.reply.text == "$" else target.reply.get(response)
        if reply is MISSING:
            outcome.error = f"the response has no reply at {target.reply}: {_clip(response)}"
            return outcomes
        outcome.reply = reply
        messages.append(
            {"role": "assistant", "content": reply if isinstance(reply, str) else json.dumps(reply)}
        )
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
