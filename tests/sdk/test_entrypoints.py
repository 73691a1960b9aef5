"""Which entrypoints a case may name: the project's own modules and what it allows, no more."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracely_sdk._config import resolve
from tracely_sdk._entrypoints import EntrypointPolicy
from tracely_sdk.errors import ConfigError

# A package that leaves a mark when imported: proof of whether a check imported it.
MARKING_INIT = """\
import os
open(os.environ["IMPORT_MARKER"], "a").close()

def run(city):
    return city
"""


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path, Path]]:
    """(project root, a directory outside it, the import marker), both directories on sys.path."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    marker = tmp_path / "imported"
    monkeypatch.setenv("IMPORT_MARKER", str(marker))
    for base, name in ((project, "inpkg_e7"), (outside, "outpkg_e7")):
        (base / name / "sub").mkdir(parents=True)
        (base / name / "__init__.py").write_text(MARKING_INIT)
        (base / name / "sub" / "__init__.py").write_text(MARKING_INIT)
        (base / name / "sub" / "agent.py").write_text(MARKING_INIT)
        monkeypatch.syspath_prepend(str(base))
    yield project, outside, marker
    for name in [m for m in sys.modules if m.split(".")[0] in ("inpkg_e7", "outpkg_e7")]:
        del sys.modules[name]


def test_the_projects_own_modules_are_allowed_without_importing_them(
    layout: tuple[Path, Path, Path],
) -> None:
    project, _, marker = layout
    policy = EntrypointPolicy(root=project.resolve())
    assert policy.refusal("inpkg_e7:run") is None
    assert policy.refusal("inpkg_e7.sub.agent:run") is None
    assert not marker.exists() and "inpkg_e7" not in sys.modules


def test_modules_outside_the_project_are_refused_without_importing_them(
    layout: tuple[Path, Path, Path],
) -> None:
    project, outside, marker = layout
    policy = EntrypointPolicy(root=project.resolve())
    reason = policy.refusal("outpkg_e7.sub.agent:run")
    assert reason is not None
    assert reason.startswith(
        "entrypoint 'outpkg_e7.sub.agent:run' is not allowed, so it was not imported: module "
        f"'outpkg_e7.sub.agent' ({(outside / 'outpkg_e7' / 'sub' / 'agent.py').resolve()}) is "
        f"not part of the project at {project.resolve()}"
    )
    assert 'entrypoints = ["outpkg_e7.sub.agent:*"]' in reason
    assert not marker.exists() and "outpkg_e7" not in sys.modules


@pytest.mark.parametrize(
    ("entrypoint", "why"),
    [
        ("os:system", "module 'os' is part of Python itself"),
        ("subprocess:run", "module 'subprocess' ("),
        ("json.decoder:JSONDecoder", "module 'json.decoder' ("),
        ("sys:exit", "module 'sys' is part of Python itself (built-in)"),
        ("os.path:join", "'os' is not a package"),
        ("pytest:main", "site-packages"),
    ],
)
def test_the_standard_library_and_installed_packages_are_refused(
    entrypoint: str, why: str, layout: tuple[Path, Path, Path]
) -> None:
    reason = EntrypointPolicy(root=layout[0].resolve()).refusal(entrypoint)
    assert reason is not None and why in reason


def test_a_virtual_environment_inside_the_project_is_not_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = tmp_path / ".venv"
    site_packages = venv / "lib" / "site-packages"
    site_packages.mkdir(parents=True)
    (site_packages / "installed_e7.py").write_text("def run(city):\n    return city\n")
    monkeypatch.syspath_prepend(str(site_packages))
    monkeypatch.setattr(sys, "prefix", str(venv))
    reason = EntrypointPolicy(root=tmp_path.resolve()).refusal("installed_e7:run")
    assert reason is not None and "is not part of the project" in reason


def test_the_project_allows_by_pattern_or_by_naming_it(layout: tuple[Path, Path, Path]) -> None:
    root = layout[0].resolve()
    assert (
        EntrypointPolicy(root=root, patterns=("outpkg_e7.*:*",)).refusal("outpkg_e7.sub.agent:run")
        is None
    )
    assert EntrypointPolicy(root=root, patterns=("os:system",)).refusal("os:system") is None
    assert EntrypointPolicy(root=root, patterns=("os:system",)).refusal("os:popen") is not None
    assert (
        EntrypointPolicy(root=root, explicit=frozenset({"os:system"})).refusal("os:system") is None
    )
    assert not layout[2].exists()


def test_an_unknown_module_is_left_to_the_import_to_report(layout: tuple[Path, Path, Path]) -> None:
    assert EntrypointPolicy(root=layout[0].resolve()).refusal("nosuchmod_e7:run") is None


def test_the_allowed_entrypoints_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACELY_ENTRYPOINTS", raising=False)
    assert resolve("entrypoints", pyproject={}) == ()
    table = {"entrypoints": ["examples.weather_agent:*", " pkg.* "]}
    assert resolve("entrypoints", pyproject=table) == ("examples.weather_agent:*", "pkg.*")
    monkeypatch.setenv("TRACELY_ENTRYPOINTS", "a:run, b.*")
    assert resolve("entrypoints", pyproject=table) == ("a:run", "b.*")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.tracely]\nentrypoints = ["x.y:*"]\n')
    monkeypatch.delenv("TRACELY_ENTRYPOINTS")
    policy = EntrypointPolicy.for_project(explicit=["z:run", None])
    assert policy.root == tmp_path.resolve()
    assert policy.patterns == ("x.y:*",) and policy.explicit == frozenset({"z:run"})
    with pytest.raises(ConfigError, match=r"\[tool.tracely\] entrypoints=\[7\]"):
        resolve("entrypoints", pyproject={"entrypoints": [7]})


def test_a_function_must_be_defined_in_the_project_not_just_reachable_from_it(
    layout: tuple[Path, Path, Path],
) -> None:
    import importlib
    import os

    policy = EntrypointPolicy(root=layout[0].resolve())
    agent = importlib.import_module("inpkg_e7.sub.agent")  # the project's; it imports os
    assert policy.refusal("inpkg_e7.sub.agent:os.system") is None  # the module is the project's
    reason = policy.refusal_of("inpkg_e7.sub.agent:os.system", os.system)
    assert reason is not None and reason.startswith(
        "entrypoint 'inpkg_e7.sub.agent:os.system' is not allowed, so it was not run: it is "
        f"defined in {os.system.__module__!r}, not in the project"
    )
    assert policy.refusal_of("inpkg_e7.sub.agent:run", agent.run) is None
    named = EntrypointPolicy(root=layout[0].resolve(), patterns=("inpkg_e7.sub.agent:os.*",))
    assert named.refusal_of("inpkg_e7.sub.agent:os.system", os.system) is None
