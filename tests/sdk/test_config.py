"""One settings table: every setting, the client's and the server's, is parsed and resolved by
the same rules (argument, environment, ``[tool.tracely]`` where a project may set it, default),
and nothing reads a tracely variable from the environment behind the table's back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracely_sdk._config import SETTINGS, resolve
from tracely_sdk.cli import Context
from tracely_sdk.cli._scenarios import _store_url
from tracely_sdk.errors import ConfigError
from tracely_sdk.server._config import SERVER_SETTINGS, ServerConfig
from tracely_sdk.store import open_store
from tracely_sdk.store._http import HTTPStore

CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory whose pyproject.toml sets the store and the token, as the working
    directory, with neither in the environment."""
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.tracely]\nstore = "sqlite://{tmp_path}/project-store.db"\n'
        'token = "from-the-project"\nport = 9\n'
    )
    monkeypatch.chdir(tmp_path)
    for var in ("TRACELY_STORE", "TRACELY_TOKEN", "TRACELY_SERVER_STORE", "TRACELY_SERVER_PORT"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def test_open_store_without_a_url_opens_the_project_store(project: Path) -> None:
    with open_store() as store:
        assert store.url == f"sqlite://{project}/project-store.db"
    assert (project / "project-store.db").exists()


def test_scenarios_read_the_project_store(project: Path) -> None:
    assert _store_url(Context(None, None)) == f"sqlite://{project}/project-store.db"  # type: ignore[arg-type]
    assert _store_url(Context(None, "sqlite:///given.db")) == "sqlite:///given.db"  # type: ignore[arg-type]


def test_the_http_store_takes_its_token_from_the_table(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert HTTPStore("http://127.0.0.1:9")._token == "from-the-project"
    monkeypatch.setenv("TRACELY_TOKEN", " from-the-environment\n")
    assert HTTPStore("http://127.0.0.1:9")._token == "from-the-environment"
    assert HTTPStore("http://127.0.0.1:9", token="given")._token == "given"


def test_a_token_that_is_not_text_is_refused_without_being_shown() -> None:
    with pytest.raises(ConfigError, match=r"\[tool.tracely\] token must be a string") as info:
        resolve("token", environ={}, pyproject={"token": 123456789})
    assert "123456789" not in str(info.value)


def test_the_content_capture_setting_reads_the_genai_modes() -> None:
    for value, expected in [
        ("span_only", True),
        ("SPAN_AND_EVENT", True),
        ("event_only", False),
        ("no_content", False),
        ("true", True),
        ("0", False),
    ]:
        assert resolve("capture_content", environ={CAPTURE: value}, pyproject={}) is expected
    with pytest.raises(ConfigError, match=f"{CAPTURE}='sometimes'.*span_only"):
        resolve("capture_content", environ={CAPTURE: "sometimes"}, pyproject={})


def test_server_settings_are_table_entries_resolved_by_the_same_rules(project: Path) -> None:
    assert {type(s) for s in SERVER_SETTINGS.values()} == {type(SETTINGS["store"])}
    assert not any(s.project for s in SERVER_SETTINGS.values())
    # [tool.tracely] configures the project, not a server: its port = 9 is not the server's.
    config = ServerConfig.load({})
    assert config.port == 8711 and config.store is None
    # An empty argument is unset for every setting alike.
    assert ServerConfig.load({"TRACELY_SERVER_PORT": "9000"}, port="").port == 9000
    assert resolve("store", "", environ={"TRACELY_STORE": "sqlite:///e.db"}) == "sqlite:///e.db"
    with pytest.raises(ConfigError, match="--port='x' is not a whole number"):
        ServerConfig.load({}, port="x")
