"""Scenarios: multi-turn checks of a live agent service, on its replies and its trace.

Replay re-runs promoted cases through your own code against recordings; scenarios talk to a
running service over HTTP, in any language, and read the trace it exports. See
``tracely scenarios run --help``.
"""

from __future__ import annotations

from tracely_sdk.scenarios._checks import (
    Call,
    Failure,
    NotEvaluated,
    TraceCalls,
    check_budget,
    check_reply,
    check_trace,
)
from tracely_sdk.scenarios._jsonpath import MISSING, JSONPath, PathError
from tracely_sdk.scenarios._run import TraceSource, run_scenario, run_scenarios
from tracely_sdk.scenarios._spec import (
    Check,
    Scenario,
    ScenarioError,
    Target,
    Turn,
    load_scenario,
    load_scenarios,
    scenario_from_data,
    slug,
    yaml_module,
)

__all__ = [
    # files
    "Check",
    "Scenario",
    "ScenarioError",
    "Target",
    "Turn",
    "load_scenario",
    "load_scenarios",
    "scenario_from_data",
    "slug",
    "yaml_module",
    # running
    "TraceSource",
    "run_scenario",
    "run_scenarios",
    # checks
    "Call",
    "Failure",
    "NotEvaluated",
    "TraceCalls",
    "check_budget",
    "check_reply",
    "check_trace",
    # paths
    "MISSING",
    "JSONPath",
    "PathError",
]
