"""opentelemetry-instrument wires the recorder: distro, configurator and the store sink."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _registered(group: str, name: str) -> bool:
    return any(ep.name == name for ep in entry_points(group=group))


pytestmark = pytest.mark.skipif(
    not _registered("opentelemetry_configurator", "tracely")
    or shutil.which("opentelemetry-instrument") is None,
    reason="tracely is not installed (pip install -e '.[dev]'), so its entry points are not registered",
)


def test_entry_points_are_registered() -> None:
    assert _registered("opentelemetry_distro", "tracely")
    assert _registered("tracely_bundle_sinks", "store")


def test_opentelemetry_instrument_records_into_the_store(tmp_path: Path) -> None:
    store = f"sqlite:///{(tmp_path / 'tracely.db').as_posix().lstrip('/')}"
    app = tmp_path / "app.py"
    app.write_text(
        textwrap.dedent(
            """
            import tracely_sdk as tracely
            with tracely.agent("instrumented", input="hi") as run:
                run.output = tracely.call_tool("t", lambda: 41 + 1)
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        TRACELY_STORE=store,
        OTEL_PYTHON_DISTRO="tracely",
        OTEL_PYTHON_CONFIGURATOR="tracely",
        OTEL_TRACES_EXPORTER="none",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
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
    from tracely_sdk.store import open_store

    with open_store(store) as s:
        (recording,) = s.list_recordings()
    assert recording.agent_name == "instrumented"
    assert recording.output == 42
    assert recording.bundle["tools"]["t"][0]["output"] == 42
