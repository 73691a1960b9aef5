"""Recording with no code change: ``TRACELY_INSTRUMENT`` alone, ``tracely run``, and
``opentelemetry-instrument`` with any configurator, in real subprocesses.

The app here never imports tracely: it calls the OpenAI SDK against the local LLM server, and
each test then reads the recordings the subprocess left in its store.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.llm_server import LLMServer, serve
from tracely_sdk import _startup
from tracely_sdk.store import open_store, sqlite_url

ROOT = Path(__file__).resolve().parents[2]

APP = """
import sys
import openai

client = openai.OpenAI(api_key="test-key", base_url=sys.argv[1], max_retries=0)
reply = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
print("answer:", reply.choices[0].message.content)
"""

# An app that sets its own TracerProvider after startup, as most instrumented apps do.
APP_WITH_ITS_OWN_PROVIDER = """
import sys
import openai
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
trace.set_tracer_provider(provider)
client = openai.OpenAI(api_key="test-key", base_url=sys.argv[1], max_retries=0)
client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
print("own provider:", trace.get_tracer_provider() is provider)
"""


def _site_dirs() -> list[Path]:
    dirs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    dirs.update(site.getsitepackages())
    return [Path(d) for d in dirs]


def _hook() -> Path:
    for directory in _site_dirs():
        if (directory / _startup.PTH_FILE).is_file():
            return directory / _startup.PTH_FILE
    pytest.fail(
        f"{_startup.PTH_FILE} is not in site-packages: install tracely (pip install -e '.[dev]')"
    )


class Run:
    """Runs a command beside a fresh LLM server and store; the recordings it left."""

    def __init__(self, tmp_path: Path, server: LLMServer) -> None:
        self.tmp_path = tmp_path
        self.server = server
        self.store = sqlite_url(tmp_path / "tracely.db")

    def __call__(
        self, command: list[str], app: str = APP, **env: str
    ) -> subprocess.CompletedProcess[str]:
        (self.tmp_path / "app.py").write_text(textwrap.dedent(app))
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
        clean.update({"PYTHONPATH": str(ROOT), "TRACELY_STORE": self.store, **env})
        return subprocess.run(
            [*command, "app.py", self.server.openai_base_url],
            env=clean,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=self.tmp_path,
        )

    def recorded_models(self) -> list[list[str]]:
        with open_store(self.store) as store:
            return [sorted(r.bundle.get("llm") or {}) for r in store.list_recordings()]


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    with serve() as (server, _):
        yield Run(tmp_path, server)


def test_the_startup_hook_is_installed_with_the_package() -> None:
    line = _hook().read_text()
    assert line.startswith("import os;")
    assert "TRACELY_INSTRUMENT" in line and "tracely_sdk._startup" in line


def test_without_tracely_instrument_the_hook_imports_nothing() -> None:
    probe = (
        "import sys; print(any(m.startswith(('tracely', 'opentelemetry')) for m in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_tracely_instrument_alone_records_an_app_that_never_imports_tracely(run: Run) -> None:
    result = run([sys.executable], TRACELY_INSTRUMENT="auto", OTEL_TRACES_EXPORTER="none")
    assert result.returncode == 0, result.stderr
    assert "answer: You said: hi" in result.stdout
    assert run.recorded_models() == [["gpt-4o"]]


def test_without_tracely_instrument_nothing_is_recorded(run: Run) -> None:
    result = run([sys.executable])
    assert result.returncode == 0, result.stderr
    assert run.recorded_models() == []


def test_the_recorder_joins_the_provider_the_app_sets_after_startup(run: Run) -> None:
    result = run([sys.executable], APP_WITH_ITS_OWN_PROVIDER, TRACELY_INSTRUMENT="auto")
    assert result.returncode == 0, result.stderr
    assert "own provider: True" in result.stdout
    assert '"name": "chat gpt-4o"' in result.stdout  # the app's own exporter got the span
    assert "Overriding of current TracerProvider" not in result.stderr
    assert run.recorded_models() == [["gpt-4o"]]


def test_a_bad_tracely_instrument_is_named_and_the_app_still_runs(run: Run) -> None:
    result = run([sys.executable], TRACELY_INSTRUMENT="opneai")
    assert result.returncode == 0, result.stderr
    assert "answer: You said: hi" in result.stdout
    assert "TRACELY_INSTRUMENT='opneai'" in result.stderr
    assert run.recorded_models() == []


def test_tracely_run_records_a_program_unchanged(run: Run) -> None:
    result = run(
        [sys.executable, "-m", "tracely_sdk.cli", "run", "--", sys.executable],
        OTEL_TRACES_EXPORTER="none",
    )
    assert result.returncode == 0, result.stderr
    assert "answer: You said: hi" in result.stdout
    assert run.recorded_models() == [["gpt-4o"]]


def _other_configurator(tmp_path: Path) -> str:
    """A PYTHONPATH entry registering OpenTelemetry's own SDK configurator as ``configurator``,
    the name opentelemetry-distro gives it."""
    info = tmp_path / "site" / "other_configurator-0.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: other-configurator\nVersion: 0.0.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[opentelemetry_configurator]\n"
        "configurator = opentelemetry.sdk._configuration:_OTelSDKConfigurator\n"
    )
    return str(tmp_path / "site")


def test_opentelemetry_instrument_records_whichever_configurator_loads(
    run: Run, tmp_path: Path
) -> None:
    if shutil.which("opentelemetry-instrument") is None:
        pytest.skip("opentelemetry-instrument is not installed")
    env: dict[str, Any] = {
        "PYTHONPATH": os.pathsep.join((str(ROOT), _other_configurator(tmp_path))),
        "OTEL_PYTHON_CONFIGURATOR": "configurator",
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        # only tracely's instrumentors: the other installed ones would add spans of their own
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai,openai_v2,anthropic,httpx,requests,urllib3",
    }
    result = run(["opentelemetry-instrument", sys.executable], **env)
    assert result.returncode == 0, result.stderr
    assert '"name": "chat gpt-4o"' in result.stdout  # exported by OpenTelemetry's configurator
    assert run.recorded_models() == [["gpt-4o"]]  # and recorded by tracely's instrumentor
