"""Which agent code replay may run: the repository under test decides, never the store.

A case names its entrypoint (``module:function``), but a case comes from a store or a case
file, which anyone with a write token or a pull request can change. So before a case's own
entrypoint is imported, :class:`EntrypointPolicy` decides whether the project allows it:

- an entrypoint the project gives itself (``tracely replay --entrypoint``, pytest's
  ``--tracely-entrypoint``, a test's ``entrypoint=``) is allowed: it does not come from a case;
- one matching a pattern of the ``entrypoints`` setting (``[tool.tracely] entrypoints =
  ["examples.weather_agent:*"]`` in pyproject.toml, or ``TRACELY_ENTRYPOINTS``) is allowed;
  a pattern is a shell-style glob on ``module:function`` (``examples.*`` means
  ``examples.*:*``);
- otherwise one whose module lives under the project root (the directory holding
  ``pyproject.toml`` or ``.git``, else the working directory) is allowed; anything else, such
  as the standard library or an installed package, is refused.

Where a module lives is found without importing it or any package above it: the top-level
name is looked up with the import system's finders (which read directories, never run a
module), and each further part of the dotted path is looked up in the directories of the
package above it.

Importing an allowed module may build a provider client (``client = OpenAI()`` at module
level), which refuses to exist without an API key although replay never sends a request:
:func:`placeholder_api_keys` gives such code a placeholder for strict replay and for the
promote-time check.
"""

from __future__ import annotations

import fnmatch
import importlib.machinery
import importlib.util
import os
import site
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["API_KEY_VARIABLES", "EntrypointPolicy", "ensure_cwd_on_path", "placeholder_api_keys"]


def ensure_cwd_on_path() -> None:
    """Put the working directory on ``sys.path``, as ``python -m`` does.

    A console script does not, so ``tracely replay --entrypoint weather_agent:run`` would not
    find the project's module.
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def _pattern(text: str) -> str:
    text = text.strip()
    return text if ":" in text else f"{text}:*"


def _is_under(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def _outside_dirs(root: Path) -> list[Path]:
    """Directories of installed code (stdlib, site-packages, a venv) that never count as the project."""
    found: set[str] = set()
    for scheme_vars in (None, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        paths = sysconfig.get_paths(vars=scheme_vars) if scheme_vars else sysconfig.get_paths()
        found.update(paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)
    try:
        found.update(site.getsitepackages())
    except AttributeError:  # pragma: no cover - some embedded interpreters lack it
        pass
    user_site = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if isinstance(user_site, str):
        found.add(user_site)
    # A virtual environment kept inside the project (./.venv) is installed code, not the project.
    found.update(p for p in {sys.prefix, sys.exec_prefix} if p)
    dirs = []
    for text in found:
        path = Path(text).resolve()
        if not _is_under(root, path):  # the project itself may live under a prefix; keep it
            dirs.append(path)
    return dirs


def module_location(module: str) -> tuple[list[Path], str | None]:
    """The files or directories of ``module`` found without running any code, and why not.

    Returns (paths, None) when found, ([], reason) otherwise.
    """
    parts = module.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError) as exc:
        return [], f"looking up {parts[0]!r} failed: {exc}"
    for depth in range(1, len(parts)):
        if spec is None:
            break
        locations = spec.submodule_search_locations
        if locations is None:
            return [], f"{'.'.join(parts[:depth])!r} is not a package"
        spec = importlib.machinery.PathFinder.find_spec(
            ".".join(parts[: depth + 1]), list(locations)
        )
    if spec is None:
        return [], f"no module named {module!r} on sys.path"
    if spec.origin and spec.has_location:
        return [Path(spec.origin)], None
    if spec.submodule_search_locations:  # a namespace package: every directory of it
        return [Path(p) for p in spec.submodule_search_locations], None
    return [], f"module {module!r} is part of Python itself ({spec.origin or 'not a file'})"


@dataclass(frozen=True)
class EntrypointPolicy:
    """Decides whether replay may import a case's entrypoint. See the module docstring."""

    root: Path
    patterns: tuple[str, ...] = ()
    explicit: frozenset[str] = frozenset()

    @classmethod
    def for_project(
        cls, explicit: Iterable[str | None] = (), patterns: Sequence[str] | None = None
    ) -> EntrypointPolicy:
        """The policy of the project around the working directory (settings per ``_config``)."""
        from tracely_sdk._config import resolve
        from tracely_sdk.store import project_root

        allowed = resolve("entrypoints", patterns)
        return cls(
            root=project_root().resolve(),
            patterns=tuple(_pattern(p) for p in allowed),
            explicit=frozenset(e.strip() for e in explicit if e),
        )

    def _named(self, spec: str) -> bool:
        """True when the project names ``spec`` itself (explicitly or by a pattern)."""
        return spec in self.explicit or any(fnmatch.fnmatchcase(spec, p) for p in self.patterns)

    def _outside(self, module: str, *, missing_ok: bool = True) -> str | None:
        """Why ``module`` is not part of the project (None if it is, or cannot be found and
        ``missing_ok``: its import will then fail with the usual message)."""
        ensure_cwd_on_path()
        paths, problem = module_location(module)
        if missing_ok and problem is not None and problem.startswith("no module named"):
            return None
        if problem is None:
            resolved = [p.resolve() for p in paths]
            outside = _outside_dirs(self.root)
            inside = all(
                _is_under(p, self.root) and not any(_is_under(p, d) for d in outside)
                for p in resolved
            )
            if inside:
                return None
            problem = f"module {module!r} ({resolved[0]}) is not part of the project at {self.root}"
        return problem

    def _refused(self, spec: str, problem: str, imported: bool) -> str:
        module = spec.partition(":")[0]
        what = "was not run" if imported else "was not imported"
        return (
            f"entrypoint {spec!r} is not allowed, so it {what}: {problem}. A case "
            "cannot choose code outside the project; to allow it, add it to [tool.tracely] "
            f'entrypoints in pyproject.toml (e.g. entrypoints = ["{module}:*"]) or '
            f"TRACELY_ENTRYPOINTS, or pass --entrypoint {spec}"
        )

    def refusal(self, entrypoint: str) -> str | None:
        """None if replay may import ``entrypoint``'s module; else why not and how to allow it.

        A module that cannot be found at all is not refused here: importing it fails the
        same way, with the usual message.
        """
        spec = entrypoint.strip()
        if self._named(spec):
            return None
        problem = self._outside(spec.partition(":")[0])
        return None if problem is None else self._refused(spec, problem, imported=False)

    def refusal_of(self, entrypoint: str, fn: object) -> str | None:
        """None if replay may call ``fn``, what ``entrypoint`` resolved to once imported.

        A project module may hold names it imported from elsewhere (``os``, ``subprocess``), so
        a function reached through an allowed module must itself be defined in the project.
        """
        spec = entrypoint.strip()
        if self._named(spec):
            return None
        defined_in = getattr(fn, "__module__", None) or getattr(type(fn), "__module__", None)
        if not isinstance(defined_in, str):
            problem = f"{spec.partition(':')[2]!r} does not say which module defines it"
        else:
            problem = self._outside(defined_in, missing_ok=False) or ""
            if problem and not problem.startswith("module "):
                problem = f"module {defined_in!r}: {problem}"
            if problem:
                problem = f"it is defined in {defined_in!r}, not in the project ({problem})"
        return self._refused(spec, problem, imported=True) if problem else None


# Provider clients built at import time (``client = OpenAI()`` at module level) refuse to exist
# without a key, although a strict replay never sends a request with it. boto3 builds a client
# without credentials but not without a region; the placeholder credentials let a call that is
# not served be signed, so the network guard refuses it and says why (botocore would stop first
# with NoCredentialsError, which hides the cause).
API_KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GROQ_API_KEY",
    "CO_API_KEY",
    "MISTRAL_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
)
PLACEHOLDER_API_KEY = "tracely-replay-placeholder"


def placeholder_api_keys() -> list[str]:
    """Give each provider API key variable that is unset a placeholder; returns their names.

    For importing agent code that is never run live: strict replay (every call is served from
    the recording, and anything that would still reach the network raises ReplayError) and the
    entrypoint check of promote and edit (which imports, never calls). A lenient run may go
    live, and then needs the real key.
    """
    filled = [name for name in API_KEY_VARIABLES if not os.environ.get(name)]
    for name in filled:
        os.environ[name] = PLACEHOLDER_API_KEY
    return filled
