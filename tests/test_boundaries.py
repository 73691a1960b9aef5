"""The import boundaries the package layout promises, checked by import-linter's contracts in
pyproject.toml (``[tool.importlinter]``): tracely_otel never imports tracely_sdk, tracely_sdk
uses only tracely_otel's public surface, the seam sits under providers and stores, which sit
under the CLI and the server, and no modules import each other in a cycle."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import tracely_otel

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "importlinter"
]


def test_every_private_module_of_tracely_otel_is_off_limits_to_tracely_sdk() -> None:
    (contract,) = [c for c in CONFIG["contracts"] if "public surface" in c["name"]]
    private = {
        f"tracely_otel.{p.stem}"
        for p in Path(tracely_otel.__file__).parent.iterdir()
        if p.name.startswith("_")
        and p.name != "__init__.py"
        and p.suffix in ("", ".py")
        and p.name != "__pycache__"
    }
    assert private <= set(contract["forbidden_modules"])


def test_the_import_contracts_are_kept() -> None:
    beside = Path(sys.executable).parent / "lint-imports"
    command = str(beside) if beside.exists() else shutil.which("lint-imports")
    if command is None:
        pytest.skip("import-linter is not installed: pip install -e '.[dev]'")
    done = subprocess.run(
        [command, "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
