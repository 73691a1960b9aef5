"""Instrumenting the OpenTelemetry way, optional SDKs, and what importing tracely imports.

The ``opentelemetry-instrument`` tests run the real command in a subprocess. When this
checkout's installed metadata does not register tracely's instrumentor entry points yet, the
test adds a throwaway distribution on ``PYTHONPATH`` that registers exactly those two.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import httpx2
import pytest

from tracely_sdk import providers
from tracely_sdk.errors import MissingDependency

ROOT = Path(__file__).resolve().parents[3]
ENTRY_POINTS = {
    "tracely_openai": "tracely_sdk._instrumentors:TracelyOpenAIInstrumentor",
    "tracely_anthropic": "tracely_sdk._instrumentors:TracelyAnthropicInstrumentor",
    "tracely_google_genai": "tracely_sdk._instrumentors:TracelyGoogleGenAIInstrumentor",
    "tracely_mcp": "tracely_sdk._instrumentors:TracelyMCPInstrumentor",
}


def _python(
    code: str, *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**_clean_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


# --------------------------------------------------------------------------- imports


def test_importing_tracely_imports_no_provider_sdk() -> None:
    result = _python(
        """
        import sys
        import tracely_sdk, tracely_sdk.providers, tracely_otel
        with tracely_sdk.fixtures({}):
            pass
        print(sorted(m for m in ("openai", "anthropic", "google.genai", "httpx2") if m in sys.modules))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_an_sdk_imported_after_a_fixtures_block_started_is_patched_on_import() -> None:
    result = _python(
        """
        import tracely_sdk
        from tracely_sdk import providers
        with tracely_sdk.fixtures({"llm": {"gpt-4o": [{"output": "Hello"}]}}) as rep:
            import openai  # imported inside the block, after it started
            client = openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1", max_retries=0)
            reply = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        print(reply.choices[0].message.content, rep.served, "httpx2.Client.send" in providers.patched_methods())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Hello ['llm:gpt-4o'] True"


def test_a_missing_sdk_names_the_extra_to_install() -> None:
    result = _python(
        """
        import sys
        sys.modules["openai"] = None  # as if it were not installed
        from tracely_sdk import providers
        from tracely_sdk.errors import MissingDependency
        try:
            providers.instrument("openai")
        except MissingDependency as exc:
            print("missing:", exc.package, exc.extra, "|", exc)
        print("auto:", providers.instrument("auto"))  # anthropic: patched once imported
        import anthropic
        print("imported:", providers.patched_methods())
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "missing: openai openai | openai is not installed; install it with: "
        "pip install '.[openai]' in a tracely checkout (or 'tracely-replay[openai]' from an index)"
    )
    assert lines[1] == "auto: []"
    assert "'httpx2.Client.send'" in lines[2]  # beneath the Anthropic SDK
    assert "OpenAI" not in lines[2]


def test_a_missing_google_genai_names_the_google_extra() -> None:
    result = _python(
        """
        import sys
        sys.modules["google.genai"] = None  # as if it were not installed
        from tracely_sdk import providers
        from tracely_sdk.errors import MissingDependency
        try:
            providers.instrument("google")
        except MissingDependency as exc:
            print("missing:", exc.package, exc.extra, "|", exc)
        print("auto:", [m for m in providers.instrument("auto") if m.startswith("Client.")])
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "missing: google.genai google | google.genai is not installed; install it with: "
        "pip install '.[google]' in a tracely checkout (or 'tracely-replay[google]' from an index)"
    )
    assert lines[1] == "auto: []"


def test_missing_dependency_is_an_import_error() -> None:
    assert issubclass(MissingDependency, ImportError)
    with pytest.raises(ValueError, match="unknown provider 'gemini'"):
        providers.instrument("gemini")


def test_tracely_init_instruments_from_the_environment(tmp_path: Path) -> None:
    result = _python(
        """
        import tracely_sdk as tracely
        from tracely_sdk import providers
        from tracely_sdk.providers import openai as tracely_openai
        tracely.init(record=False)
        from tracely_sdk.providers import anthropic as tracely_anthropic
        before = tracely_anthropic.LAYER.live
        import anthropic  # an SDK imported after init() is patched on import
        import openai
        patched = providers.patched_methods()
        print("httpx2.Client.send" in patched, before,
              tracely_anthropic.LAYER.live, tracely_openai.LAYER.live)
        """,
        env={"TRACELY_INSTRUMENT": "auto", "OTEL_TRACES_EXPORTER": "none"},
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True False True True"  # auto: every installed SDK


# --------------------------------------------------------------------------- BaseInstrumentor


@pytest.fixture
def clean_patches() -> Iterator[None]:
    providers.uninstrument()
    yield
    providers.uninstrument()


def test_the_instrumentors_patch_and_restore(clean_patches: None) -> None:
    pytest.importorskip("opentelemetry.instrumentation.instrumentor")
    from tracely_sdk._instrumentors import (
        TracelyAnthropicInstrumentor,
        TracelyGoogleGenAIInstrumentor,
        TracelyOpenAIInstrumentor,
    )

    original = httpx2.Client.__dict__["send"]
    instrumentor = TracelyOpenAIInstrumentor()
    assert (
        instrumentor is TracelyOpenAIInstrumentor()
    )  # OpenTelemetry's instrumentors are singletons
    assert list(instrumentor.instrumentation_dependencies()) == ["openai >= 1.40"]
    assert list(TracelyAnthropicInstrumentor().instrumentation_dependencies()) == [
        "anthropic >= 0.40"
    ]
    assert list(TracelyGoogleGenAIInstrumentor().instrumentation_dependencies()) == [
        "google-genai >= 1.0"
    ]
    instrumentor.instrument()
    try:
        # The OpenAI SDK is recorded at the HTTP client it sends through.
        assert httpx2.Client.__dict__["send"].__wrapped__ is original
        assert "httpx2.Client.send" in providers.patched_methods()
        assert not any(m.startswith("Anthropic") for m in providers.patched_methods())
    finally:
        instrumentor.uninstrument()
    assert httpx2.Client.__dict__["send"] is original


def test_the_mcp_instrumentor_patches_the_client_session(clean_patches: None) -> None:
    pytest.importorskip("opentelemetry.instrumentation.instrumentor")
    from mcp.client.session import ClientSession

    from tracely_sdk._instrumentors import TracelyMCPInstrumentor

    original = ClientSession.__dict__["call_tool"]
    instrumentor = TracelyMCPInstrumentor()
    assert list(instrumentor.instrumentation_dependencies()) == ["mcp >= 2.0"]
    instrumentor.instrument()
    try:
        assert ClientSession.__dict__["call_tool"].__wrapped__ is original
        assert any(m.startswith("ClientSession.") for m in providers.patched_methods())
    finally:
        instrumentor.uninstrument()
    assert ClientSession.__dict__["call_tool"] is original


def test_every_instrumentor_is_an_entry_point() -> None:
    from tracely_sdk import _instrumentors

    pyproject = (ROOT / "pyproject.toml").read_text()
    section = pyproject.split("[project.entry-points.opentelemetry_instrumentor]")[1]
    declared = dict(ENTRY_POINTS)
    for line in section.strip().splitlines():
        if not line.strip() or line.startswith("["):
            break
        name, _, target = line.partition("=")
        assert declared.pop(name.strip()) == target.strip().strip('"')
    assert not declared, f"not in pyproject.toml: {declared}"
    classes = {target.rpartition(":")[2] for target in ENTRY_POINTS.values()}
    assert classes == set(_instrumentors.__all__)


# --------------------------------------------------------------------------- opentelemetry-instrument


def _entry_points_path(tmp_path: Path) -> str:
    """A PYTHONPATH entry that registers the instrumentors, unless tracely's metadata does."""
    registered = {ep.name for ep in entry_points(group="opentelemetry_instrumentor")}
    if set(ENTRY_POINTS) <= registered:
        return ""
    info = tmp_path / "site" / "tracely_instrumentors-0.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tracely-instrumentors\nVersion: 0.0.0\n"
    )
    lines = ["[opentelemetry_instrumentor]", *(f"{k} = {v}" for k, v in ENTRY_POINTS.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return str(tmp_path / "site")


APP = """
import httpx2
import anthropic
from tracely_sdk import providers
from tracely_sdk.providers import _patching, openai as tracely_openai
from tracely_sdk.providers import anthropic as tracely_anthropic

# Whether the client's outermost wrapper is tracely's own, that is: no other instrumentor's.
alone = _patching.wrapper_of(httpx2.Client, "send") is httpx2.Client.__dict__["send"]
print(providers.patched_methods() != [], _patching.is_installed(httpx2.Client, "send"),
      tracely_anthropic.LAYER.live, tracely_openai.LAYER.live, alone)
"""


def _instrument(tmp_path: Path, disabled: str) -> list[str]:
    if shutil.which("opentelemetry-instrument") is None:
        pytest.skip("opentelemetry-instrument is not installed")
    app = tmp_path / "app.py"
    app.write_text(APP)
    extra = _entry_points_path(tmp_path)
    env = _clean_env()
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), extra) if p),
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=disabled,
        OTEL_TRACES_EXPORTER="none",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        TRACELY_RECORD="false",
    )
    result = subprocess.run(
        ["opentelemetry-instrument", sys.executable, str(app)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_opentelemetry_instrument_loads_tracelys_instrumentors_by_their_own_names(
    tmp_path: Path,
) -> None:
    # Disabling the other instrumentors' shared names leaves tracely's on, and alone.
    patched, openai_on, anthropic_on, live, alone = _instrument(tmp_path, "openai,anthropic")
    assert (patched, openai_on, anthropic_on, live, alone) == ("True",) * 5


def test_otel_python_disabled_instrumentations_switches_tracely_off(tmp_path: Path) -> None:
    patched, openai_on, anthropic_on, live, _ = _instrument(
        tmp_path,
        "tracely_openai,tracely_anthropic,tracely_mcp,tracely_google_genai,openai,anthropic",
    )
    assert (patched, openai_on, anthropic_on, live) == ("False", "False", "False", "False")


def test_only_one_provider_can_be_switched_off(tmp_path: Path) -> None:
    patched, openai_on, anthropic_on, _, _ = _instrument(
        tmp_path, "tracely_anthropic,openai,anthropic"
    )
    assert (patched, openai_on, anthropic_on) == ("True", "True", "False")
