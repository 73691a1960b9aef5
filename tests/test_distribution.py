"""What users install is what was tested.

``scripts/test`` (CI) installs the built wheel into a fresh venv and runs the suite from a copy
of the repository without the source packages; it names the wheel in
``TRACELY_TEST_INSTALLED_FROM`` and the source tree's modules in ``TRACELY_TEST_SOURCE_MODULES``.
Then these tests prove the suite really ran against the wheel, and that the wheel holds and
imports every module of both packages. From a development checkout they check the same modules
against the source tree.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import pkgutil
import sysconfig
from pathlib import Path

import pytest

import tracely_otel
import tracely_sdk

ROOT = Path(__file__).resolve().parents[1]
INSTALLED_FROM = os.environ.get("TRACELY_TEST_INSTALLED_FROM")
PACKAGES = (tracely_otel, tracely_sdk)


def module_names() -> list[str]:
    """Every module of both packages, as the packages in sys.path hold them."""
    names = []
    for package in PACKAGES:
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            names.append(info.name)
    return sorted(names)


def source_module_names() -> list[str]:
    """Every module the repository's source tree has (the list CI wrote before it hid them)."""
    listing = os.environ.get("TRACELY_TEST_SOURCE_MODULES")
    if listing:
        paths = Path(listing).read_text(encoding="utf-8").split()
    else:
        paths = [
            str(p.relative_to(ROOT))
            for package in PACKAGES
            for p in (ROOT / package.__name__).rglob("*.py")
        ]
    names = []
    for path in paths:
        parts = Path(path).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


def test_every_source_module_is_installed() -> None:
    assert source_module_names(), "no source modules found"
    missing = sorted(set(source_module_names()) - set(module_names()))
    assert not missing, f"modules missing from what is installed: {missing}"


@pytest.mark.parametrize("name", [n for n in module_names() if not n.endswith(".__main__")])
def test_every_module_imports(name: str) -> None:
    importlib.import_module(name)


@pytest.mark.skipif(not INSTALLED_FROM, reason="not running against a built wheel")
def test_the_suite_runs_against_the_installed_wheel() -> None:
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    for package in PACKAGES:
        where = Path(package.__file__ or "").resolve()
        assert where.is_relative_to(site), f"{package.__name__} imported from {where}, not {site}"
    dist = importlib.metadata.distribution("tracely-replay")
    assert not (dist.read_text("direct_url.json") or "").count('"editable": true')
    assert Path(INSTALLED_FROM).name.startswith(f"tracely_replay-{dist.version}-")
    assert tracely_sdk.__version__ == dist.version
    files = {str(f) for f in dist.files or []}
    assert f"tracely_replay-{dist.version}.dist-info/licenses/LICENSE" in files
    assert "tracely_autoinstrument.pth" in files


def test_distribution_metadata() -> None:
    meta = importlib.metadata.metadata("tracely-replay")
    assert meta["Name"] == "tracely-replay"
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Requires-Python"] == ">=3.10"
    classifiers = meta.get_all("Classifier") or []
    for minor in (10, 11, 12, 13):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert meta.get_all("Project-URL"), "project.urls are missing"
    assert "LICENSE" in (meta.get_all("License-File") or [])
    scripts = {ep.name for ep in importlib.metadata.entry_points(group="console_scripts")}
    assert "tracely" in scripts
