"""setup()/init(): the app's provider is never replaced, nothing is added twice."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import tracely_sdk as tracely
from tracely_otel import FixtureSpanProcessor, SetupError, exporter_configured, setup

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def processors(provider: TracerProvider) -> list[Any]:
    return list(provider._active_span_processor._span_processors)


def test_builds_a_provider_when_none_is_set(
    unset_global_provider: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "support")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci")
    provider = setup(environ={})
    assert provider is trace.get_tracer_provider()
    assert provider.resource.attributes["service.name"] == "support"
    assert provider.resource.attributes["deployment.environment"] == "ci"
    # no endpoint configured: nothing exports, the recorder is attached
    assert [type(p) for p in processors(provider)] == [FixtureSpanProcessor]


def test_keeps_the_apps_provider_and_its_exporters(unset_global_provider: None) -> None:
    app = TracerProvider()
    app_processor = SimpleSpanProcessor(
        type("E", (), {"export": lambda s, b: None, "shutdown": lambda s: None})()
    )
    app.add_span_processor(app_processor)
    trace.set_tracer_provider(app)
    provider = setup(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert provider is app
    kinds = [type(p) for p in processors(app)]
    assert kinds == [SimpleSpanProcessor, FixtureSpanProcessor]  # no second exporter


def test_called_twice_duplicates_nothing(unset_global_provider: None) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    first = setup(environ=env, on_bundle=lambda t, b: None)
    before = processors(first)
    second = setup(environ=env)
    assert second is first and processors(second) == before
    assert [type(p) for p in before] == [FixtureSpanProcessor, BatchSpanProcessor]


def test_sdk_disabled(unset_global_provider: None) -> None:
    assert setup(environ={"OTEL_SDK_DISABLED": "true"}) is None
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER='zipkin'"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/xml"},
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
        ({"OTEL_SDK_DISABLED": "maybe"}, "OTEL_SDK_DISABLED"),
    ],
)
def test_bad_settings_name_the_variable(
    unset_global_provider: None, env: dict[str, str], message: str
) -> None:
    with pytest.raises(SetupError, match=message):
        setup(environ=env)


def test_init_turns_setup_errors_into_config_errors(
    unset_global_provider: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(tracely.ConfigError, match="OTEL_TRACES_EXPORTER"):
        tracely.init()


@pytest.mark.parametrize(
    ("env", "configured"),
    [
        ({}, False),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, False),  # an empty variable is unset
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:9"}, False),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, True),  # setup() then says what is wrong
    ],
)
def test_exporter_configured_reads_the_standard_variables(
    env: dict[str, str], configured: bool
) -> None:
    assert exporter_configured(env) is configured


def test_the_sampler_applies_to_the_provider_setup_builds(unset_global_provider: None) -> None:
    provider = setup(environ={}, sampler=ALWAYS_OFF)
    assert provider is not None and provider.sampler is ALWAYS_OFF
    with provider.get_tracer("t").start_as_current_span("unread") as span:
        assert not span.is_recording()
        assert span.get_span_context().is_valid  # the ids still exist


def test_the_sampler_leaves_the_apps_provider_alone(unset_global_provider: None) -> None:
    app = TracerProvider()
    trace.set_tracer_provider(app)
    assert setup(environ={}, sampler=ALWAYS_OFF) is app
    assert app.sampler is not ALWAYS_OFF


def test_exports_over_real_otlp_http(unset_global_provider: None, otlp_collector: Any) -> None:
    endpoint = otlp_collector.endpoint
    provider = setup(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, endpoint=endpoint)
    assert provider is not None
    with tracely.agent("a", input=1):
        tracely.call_tool("t", lambda: 1)
    provider.force_flush()
    assert otlp_collector.received[0][0] == "/v1/traces"
    assert sorted(s.name for s in otlp_collector.spans) == ["execute_tool t", "invoke_agent a"]


def _run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    full_env.update({"TRACELY_RECORD": "false", **env}, PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_pending_spans_are_flushed_at_exit(otlp_collector: Any) -> None:
    endpoint = otlp_collector.endpoint
    result = _run(
        """
        import tracely_sdk as tracely
        tracely.init()
        with tracely.agent("exit-agent", input=1):
            tracely.call_tool("t", lambda: 1)
        """,
        {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
    )
    assert result.returncode == 0, result.stderr
    assert sorted(s.name for s in otlp_collector.spans) == [
        "execute_tool t",
        "invoke_agent exit-agent",
    ]


def test_no_endpoint_means_no_connection_noise() -> None:
    result = _run(
        """
        import tracely_sdk as tracely
        got = []
        provider = tracely.init(on_bundle=lambda t, b: got.append(b))
        with tracely.agent("quiet", input=1):
            tracely.call_tool("t", lambda: 1)
        provider.force_flush()
        assert len(got) == 1, got
        """,
        {},
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_importing_tracely_imports_no_provider_sdk() -> None:
    result = _run(
        """
        import sys
        import tracely_sdk, tracely_otel
        assert "openai" not in sys.modules and "anthropic" not in sys.modules, sorted(sys.modules)
        """,
        {},
    )
    assert result.returncode == 0, result.stderr


def test_tracely_otel_never_imports_tracely_sdk() -> None:
    result = _run(
        """
        import sys
        import tracely_otel
        assert not any(m.startswith("tracely_sdk") for m in sys.modules)
        """,
        {},
    )
    assert result.returncode == 0, result.stderr


def test_an_exporter_that_is_down_never_changes_the_agents_result(
    unset_global_provider: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # stop retrying soon

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = setup(environ={}, endpoint=f"http://127.0.0.1:{port}")
    assert provider is not None
    with tracely.agent("a", input=1) as run:
        run.output = tracely.call_tool("t", lambda: "still works")
    with pytest.raises(ZeroDivisionError):
        tracely.call_tool("boom", lambda: 1 / 0)
    assert run.output == "still works"
    provider.force_flush(timeout_millis=2000)  # the export fails in the background, quietly


def test_the_last_recordings_reach_every_store_at_exit(tmp_path: Any) -> None:
    from tracely_sdk.store import open_store, sqlite_url

    first, second = (sqlite_url(tmp_path / f"{name}.db") for name in ("first", "second"))
    result = _run(
        f"""
        import time
        import tracely_otel._processor as processor
        import tracely_sdk as tracely

        extract = processor.bundle_from_spans

        def slow(spans):  # the recorder is still busy when the interpreter exits
            time.sleep(0.3)
            return extract(spans)

        processor.bundle_from_spans = slow
        tracely.init(store={first!r})
        with tracely.agent("a", input=1):
            tracely.call_tool("t", lambda: 1)
        # a second store: its writer's exit hook is registered after the recorder's
        tracely.init(store={second!r})
        with tracely.agent("a", input=2):
            tracely.call_tool("t", lambda: 2)
        """,
        {"TRACELY_RECORD": "true"},
    )
    assert result.returncode == 0, result.stderr
    for url, expected in ((first, 2), (second, 1)):
        store = open_store(url)
        try:
            assert len(store.list_recordings()) == expected, url
        finally:
            store.close()
