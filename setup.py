"""Installs ``tracely_autoinstrument.pth`` into site-packages beside the packages.

Everything else is declared in ``pyproject.toml``. The file's one line runs at interpreter
startup; it imports tracely only when ``TRACELY_INSTRUMENT`` is set (see tracely_sdk/_startup.py).
"""

from __future__ import annotations

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH_FILE = "tracely_autoinstrument.pth"
PTH_LINE = (
    "import os; os.environ.get('TRACELY_INSTRUMENT', '').strip() and "
    "__import__('importlib').import_module('tracely_sdk._startup').start()\n"
)


class build_py_with_pth(build_py):
    """build_py, plus the startup hook at the root of what is installed."""

    def run(self) -> None:
        super().run()
        # An editable install (PEP 660) links the packages, and installs as they are only the
        # files written to the root of the wheel it builds: the install command's directory.
        editable = getattr(self, "editable_mode", False)
        root = self.get_finalized_command("install").install_lib if editable else self.build_lib
        with open(os.path.join(root, PTH_FILE), "w", encoding="utf-8") as f:
            f.write(PTH_LINE)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH_FILE)]


setup(cmdclass={"build_py": build_py_with_pth})
