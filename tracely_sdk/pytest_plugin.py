"""Run tracely regression cases inside a pytest suite.

    pytest --tracely-store sqlite:///ci.db                              # one test per case
    pytest --tracely-cases cases/ -k paris                              # from exported files
    pytest --tracely-store sqlite:///ci.db --tracely-tag smoke
    pytest --tracely-cases cases/ --tracely-entrypoint agent:run        # for cases without one

Each case is a test item named by its case id (``tracely::paris-weather``), so ``-k`` selects
cases, and its failure shows the same verdict, reasons and diff as ``tracely replay``. A case
replays through its own entrypoint; ``--tracely-entrypoint`` is the default for cases without
one. In a hand-written test, the ``tracely_replay`` fixture replays one case; a verdict that is
not a pass fails the test with those same reasons and diff. It returns the
:class:`~tracely_sdk._runner.CaseResult` (``.replay`` is the ReplayReport) to assert more on;
``check=False`` returns a failing result instead, for a test that inspects it::

    import pytest

    @pytest.mark.tracely_case("paris-weather")
    def test_paris(tracely_replay):
        result = tracely_replay()                       # the marked case; fails unless PASS
        assert "tools:get_weather" in result.replay.served

    @pytest.mark.tracely_case("paris-weather")
    def test_the_regression_is_caught(tracely_replay):
        result = tracely_replay(entrypoint="examples.weather_agent:run_broken", check=False)
        assert result.verdict == "FAIL" and result.unused == ["tools:get_weather"]

A case's own entrypoint is imported only if the project allows it (see
``tracely_sdk._entrypoints``); an entrypoint given by ``--tracely-entrypoint``, the marker or
the test is the project's own choice and always allowed. An entrypoint given by the marker or
the test replaces the case's own.

The plugin lives in the same process as the suite's other tests, so nothing it meets stops
them: a store that cannot be read, a case file that does not load, or agent code that fails to
import is a failing test item saying why, and the other tests run. Options that select no case
at all are a usage error (``--tracely-allow-empty`` when that is intended). Strict replay gives
agent code the placeholder API keys ``tracely replay`` gives it, only while tracely imports and
replays it: the suite's other tests see the environment they were given.

Without a ``--tracely-*`` option the plugin collects nothing and changes nothing.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tracely_sdk._reports import format_result
from tracely_sdk._runner import CaseResult, ReplayCase

__all__ = ["TracelyCaseItem", "TracelyProblem", "TracelyReplay"]


@dataclass
class _State:
    """The plugin's settings for one pytest run, and what it opened."""

    entrypoint: str | None
    store_url: str | None
    cases_dir: str | None
    tags: list[str]
    strict: bool
    allow_empty: bool = False
    store: Any = None
    # TRACELY_ALLOW_NETWORK before --tracely-allow-network replaced it (restored at the end)
    network_env: tuple[str | None] | None = None
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # entrypoint -> why it did not import
    problems: list[TracelyProblem] = field(default_factory=list)

    @property
    def collects(self) -> bool:
        return bool(self.entrypoint or self.store_url or self.cases_dir or self.tags)

    def open_store(self) -> Any:
        if self.store is None:
            from tracely_sdk._config import resolve
            from tracely_sdk.store import open_store

            self.store = open_store(resolve("store", self.store_url), create=False)
        return self.store

    def source(self) -> str:
        """Where the cases come from, safe to show."""
        if self.cases_dir is not None:
            return f"the case directory {self.cases_dir}"
        from tracely_sdk._config import resolve
        from tracely_sdk.store import default_store_url, redact_url

        return f"the store {redact_url(resolve('store', self.store_url) or default_store_url())}"

    @contextmanager
    def api_keys(self, strict: bool) -> Iterator[None]:
        """Placeholder provider API keys for agent code under strict replay, as ``tracely
        replay`` sets them; those it set are removed after, for the suite's other tests."""
        from tracely_sdk._entrypoints import PLACEHOLDER_API_KEY, placeholder_api_keys

        filled = placeholder_api_keys() if strict else []
        try:
            yield
        finally:
            for name in filled:
                if os.environ.get(name) == PLACEHOLDER_API_KEY:
                    del os.environ[name]

    def function(self, entrypoint: str) -> Callable[..., Any]:
        """The function ``entrypoint`` names, imported once; a failed import raises the same
        EntrypointError each time it is asked for, without importing again."""
        from tracely_sdk._runner import EntrypointError, load_entrypoint

        if entrypoint in self.failed:
            raise EntrypointError(self.failed[entrypoint])
        fn = self.functions.get(entrypoint)
        if fn is None:
            try:
                with self.api_keys(self.strict):
                    fn = load_entrypoint(entrypoint)
            except EntrypointError as exc:
                self.failed[entrypoint] = str(exc)
                raise
            self.functions[entrypoint] = fn
        return fn

    def policy(self, override: str | None) -> Any:
        from tracely_sdk._entrypoints import EntrypointPolicy

        return EntrypointPolicy.for_project(explicit=[override, self.entrypoint])

    def load(
        self,
        case_ids: tuple[str, ...] = (),
        tags: tuple[str, ...] = (),
        override: str | None = None,
    ) -> list[ReplayCase]:
        """The cases, each whose own entrypoint the project does not allow marked not to run
        (unless ``override``, the test's own choice, replaces it)."""
        from tracely_sdk._runner import load_cases, refuse_disallowed

        if self.cases_dir is not None:
            cases = load_cases(cases_dir=self.cases_dir, case_ids=case_ids, tags=tags)
        else:
            cases = load_cases(store=self.open_store(), case_ids=case_ids, tags=tags)
        return refuse_disallowed(cases, override, self.policy(override))

    def checked(self, cases: list[ReplayCase], override: str | None) -> list[ReplayCase]:
        """``cases`` with those whose imported function is not the project's marked not to run."""
        from tracely_sdk._runner import refuse_disallowed

        return refuse_disallowed(cases, override, self.policy(override), self.functions)

    def close(self) -> None:
        if self.network_env is not None:
            from tracely_sdk._network_guard import ENV_VAR

            (previous,), self.network_env = self.network_env, None
            os.environ.pop(ENV_VAR, None)
            if previous is not None:
                os.environ[ENV_VAR] = previous
        store, self.store = self.store, None
        if store is not None:
            store.close()


_STATE = pytest.StashKey[_State]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tracely", "tracely regression cases")
    group.addoption(
        "--tracely-entrypoint",
        metavar="MODULE:FUNCTION",
        help="the agent function for the cases without an entrypoint of their own (in the "
        "collected tests and in tracely_replay); collects one test per case, as --tracely-store",
    )
    group.addoption(
        "--tracely-store",
        metavar="URL",
        help="collect one test per case in this tracely store (default store: $TRACELY_STORE, "
        "else .tracely/tracely.db)",
    )
    group.addoption(
        "--tracely-cases",
        metavar="DIR",
        help="read cases from DIR (as written by `tracely cases export`) instead of the store",
    )
    group.addoption(
        "--tracely-tag",
        action="append",
        default=[],
        metavar="TAG",
        help="only the cases with this tag (repeatable: any of them)",
    )
    group.addoption(
        "--tracely-allow-empty",
        action="store_true",
        default=False,
        help="collect no case without an error when none is selected (by default an error)",
    )
    group.addoption(
        "--tracely-lenient",
        action="store_true",
        default=False,
        help="replay leniently (live fall-through on a miss); verdicts say LENIENT",
    )
    group.addoption(
        "--tracely-allow-network",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="let strict replay connect to this host (repeatable); any other connection, "
        "loopback included, is refused and fails its case",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "tracely_case(case_id, entrypoint=None): the tracely case that the tracely_replay "
        "fixture replays in this test",
    )
    if config.getoption("--tracely-store") and config.getoption("--tracely-cases"):
        raise pytest.UsageError("--tracely-store and --tracely-cases are alternatives; give one")
    config.stash[_STATE] = _State(
        entrypoint=config.getoption("--tracely-entrypoint"),
        store_url=config.getoption("--tracely-store"),
        cases_dir=config.getoption("--tracely-cases"),
        tags=list(config.getoption("--tracely-tag") or []),
        strict=not config.getoption("--tracely-lenient"),
        allow_empty=config.getoption("--tracely-allow-empty"),
    )
    allowed = config.getoption("--tracely-allow-network")
    if allowed:
        from tracely_sdk._network_guard import allow_in_process
        from tracely_sdk.errors import ConfigError

        try:
            config.stash[_STATE].network_env = (
                allow_in_process(allowed, "--tracely-allow-network"),
            )
        except ConfigError as exc:
            raise pytest.UsageError(f"tracely: {exc}") from None


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.close()


class CaseFailed(Exception):
    """A case's verdict was not a pass; carries the result to report."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(f"{result.verdict} {result.case_id}")
        self.result = result


class TracelyCases(pytest.Collector):
    """The parent of the case items: ``tracely::<case id>``."""

    def collect(self) -> list[pytest.Item]:  # pragma: no cover - items are added directly
        return []


class TracelyCaseItem(pytest.Item):
    """One tracely case, replayed through its entrypoint."""

    def __init__(self, *, case: ReplayCase, entrypoint: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.entrypoint = entrypoint
        self.extra_keyword_matches.update(case.tags)
        self.add_marker(pytest.mark.tracely_case(case.id))
        self.result: CaseResult | None = None

    def runtest(self) -> None:
        from tracely_sdk._runner import run_case

        state = self.config.stash[_STATE]
        # Collection imported the entrypoint, or put why it could not on the case as a problem.
        fn = (
            state.function(self.entrypoint)
            if self.entrypoint and self.case.problem is None
            else _unused
        )
        with state.api_keys(state.strict):
            self.result = result = run_case(
                self.case, fn, strict=state.strict, entrypoint=self.entrypoint
            )
        self.user_properties.append(("tracely.verdict", result.verdict))
        if result.version is not None:
            self.user_properties.append(("tracely.case.version", result.version))
        if result.trace_id is not None:
            self.user_properties.append(("tracely.trace_id", result.trace_id))
        if not result.ok:
            raise CaseFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, CaseFailed):
            result = excinfo.value.result
            text = format_result(result)
            if result.traceback:
                text += "\n\n" + result.traceback.rstrip()
            return text
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"tracely case {self.case.id}"


class _Problem(Exception):
    """Why cases could not be collected."""


class TracelyProblem(pytest.Item):
    """A failing test standing for cases that could not be collected: ``tracely::[cases]``."""

    def __init__(self, *, problem: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.problem = problem

    def runtest(self) -> None:
        raise _Problem(self.problem)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, _Problem):
            return f"tracely: {self.problem}"
        return super().repr_failure(excinfo, style=style)  # pragma: no cover - never raised

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"tracely {self.name}"


def _unused(*args: Any, **kwargs: Any) -> Any:  # pragma: no cover - never called
    raise AssertionError("a case that cannot be loaded is never run")


def _describe(exc: BaseException) -> str:
    from tracely_sdk.errors import TracelyError

    return str(exc) if isinstance(exc, TracelyError) else f"{type(exc).__name__}: {exc}"


def _not_run(case: ReplayCase, problem: str) -> ReplayCase:
    return dataclasses.replace(case, problem=problem, problem_type="EntrypointError")


def _ready(state: _State, cases: list[ReplayCase]) -> tuple[list[ReplayCase], dict[str, str]]:
    """``cases`` with their entrypoints imported, each that cannot run marked with why; and
    the problems that belong to no case."""
    from tracely_sdk.errors import ConfigError

    ready = []
    for case in cases:
        ep = case.entrypoint or state.entrypoint
        if case.problem is None and ep is None:
            case = _not_run(
                case,
                "the case has no entrypoint, so it was not run: pass --tracely-entrypoint "
                "module:function, or set one with `tracely cases promote ... --entrypoint "
                "module:function`",
            )
        elif case.problem is None and ep is not None:
            try:
                state.function(ep)
            except ConfigError as exc:
                case = _not_run(case, f"{exc}; the case was not run")
        ready.append(case)
    problems = {}
    used = {c.entrypoint or state.entrypoint for c in cases}
    if state.entrypoint and state.entrypoint not in used:
        # Checked even when every case has its own: a typo must not pass unnoticed.
        try:
            state.function(state.entrypoint)
        except ConfigError as exc:
            problems["[entrypoint]"] = f"--tracely-entrypoint: {exc}"
    return state.checked(ready, None), problems


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect, so they select among the cases
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or not state.collects:
        return
    parent = TracelyCases.from_parent(session, name="tracely", nodeid="tracely")
    cases: list[ReplayCase] = []
    problems: dict[str, str] = {}  # item name -> why
    try:
        cases = state.load(tags=tuple(state.tags))
    except Exception as exc:  # a store or directory that fails must not stop the other tests
        problems["[cases]"] = f"no case could be read from {state.source()}: {_describe(exc)}"
    else:
        if not cases and not state.allow_empty:
            raise pytest.UsageError(f"tracely: {_nothing_selected(state)}")
        cases, problems = _ready(state, cases)
    collected: list[pytest.Item] = [
        TracelyCaseItem.from_parent(
            parent, name=case.id, case=case, entrypoint=case.entrypoint or state.entrypoint
        )
        for case in cases
    ]
    state.problems = [
        TracelyProblem.from_parent(parent, name=name, problem=problem)
        for name, problem in problems.items()
    ]
    # Reported like any collected node, so `collected N items` and --collect-only count them.
    reported: list[pytest.Item | pytest.Collector] = [*collected, *state.problems]
    config.hook.pytest_collectreport(
        report=pytest.CollectReport(parent.nodeid, "passed", None, reported)
    )
    items.extend(collected)


@pytest.hookimpl(tryfirst=True)  # before the terminal reports what was collected
def pytest_collection_finish(session: pytest.Session) -> None:
    """The problem items join after -k/-m selection: they are no case, and a selection of
    cases must not hide that the cases could not be read."""
    state = session.config.stash.get(_STATE, None)
    if state is not None and state.problems:
        session.items.extend(state.problems)


def _nothing_selected(state: _State) -> str:
    total = len(state.load())
    filters = " ".join(f"--tracely-tag {t}" for t in state.tags)
    found = (
        f"holds {total} case(s), none selected by {filters}"
        if total
        else "holds no cases (promote a recording with `tracely cases promote TRACE_ID`)"
    )
    return (
        f"no cases to replay: {state.source()} {found}. A run that replays nothing is not a "
        "pass: check the options, or pass --tracely-allow-empty if that is intended"
    )


class TracelyReplay:
    """Replays one case by id in a hand-written test: ``tracely_replay("paris-weather")``."""

    def __init__(self, state: _State, marker: pytest.Mark | None) -> None:
        self._state = state
        self._marker = marker

    def case(self, case_id: str | None = None, entrypoint: str | None = None) -> ReplayCase:
        """The case ``case_id`` (default: the one named by ``@pytest.mark.tracely_case``).

        Unless ``entrypoint`` replaces it, a case whose own entrypoint the project does not
        allow is marked not to be run (its ``problem`` says why).
        """
        from tracely_sdk.errors import ConfigError, StoreError

        wanted = case_id or self._marked_id()
        try:
            return self._state.load(case_ids=(wanted,), override=entrypoint)[0]
        except (ConfigError, StoreError) as exc:
            problem = str(exc)
        pytest.fail(f"tracely: {problem}", pytrace=False)

    def _marked_id(self) -> str:
        if self._marker is None or not self._marker.args:
            pytest.fail(
                "tracely_replay() needs a case id, or a @pytest.mark.tracely_case('id') marker",
                pytrace=False,
            )
        return str(self._marker.args[0])

    def __call__(
        self,
        case_id: str | None = None,
        *,
        entrypoint: str | None = None,
        strict: bool | None = None,
        check: bool = True,
    ) -> CaseResult:
        """Replay the case and return its result; a verdict that is not a pass fails the test.

        The failure shows the verdict, reasons and diff as ``tracely replay`` prints them.
        With ``check=False`` the result is returned whatever the verdict, to inspect it.
        The entrypoint is ``entrypoint``, else the marker's ``entrypoint=``, else the case's
        own (if the project allows it), else ``--tracely-entrypoint``.
        """
        marked = self._marker.kwargs.get("entrypoint") if self._marker is not None else None
        given = entrypoint or marked
        result = self._replay(self.case(case_id, given), given, strict)
        if check and not result.ok:
            text = format_result(result)
            if result.traceback:
                text += "\n\n" + result.traceback.rstrip()
            pytest.fail(text, pytrace=False)
        return result

    def _replay(self, case: ReplayCase, given: str | None, strict: bool | None) -> CaseResult:
        from tracely_sdk._runner import run_case
        from tracely_sdk.errors import ConfigError

        ep = given or case.entrypoint or self._state.entrypoint
        strict = self._state.strict if strict is None else strict
        if ep is None and case.problem is None:
            pytest.fail(
                f"tracely case {case.id} has no entrypoint: pass entrypoint='module:function' "
                "or --tracely-entrypoint",
                pytrace=False,
            )
        try:
            fn = self._state.function(ep) if ep is not None and case.problem is None else _unused
        except ConfigError as exc:
            problem = str(exc)
        else:
            case = self._state.checked([case], given)[0]
            if case.problem is not None:
                fn = _unused
            with self._state.api_keys(strict):
                return run_case(case, fn, strict=strict, entrypoint=ep)
        pytest.fail(f"tracely: {problem}", pytrace=False)


@pytest.fixture
def tracely_replay(request: pytest.FixtureRequest) -> TracelyReplay:
    """Replay one tracely case by id and get its CaseResult (``.replay`` is the ReplayReport)."""
    return TracelyReplay(
        request.config.stash[_STATE], request.node.get_closest_marker("tracely_case")
    )
