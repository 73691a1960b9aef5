"""The tracely server: OTLP in from any collector, recordings and cases over HTTP.

``tracely serve --store URL`` runs it (see :mod:`tracely_sdk.server._cli`); in code,
:func:`create_server` builds one from a :class:`ServerConfig`.

Importing this package is cheap: it registers the ``http``/``https`` store backend (the client
of this server) and the ``postgresql``/``postgres`` backend with
:func:`tracely_sdk.store.register_backend`, each imported only when a URL of its scheme is
opened, and loads the server itself only when :func:`create_server` or :class:`ServerConfig`
is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracely_sdk.errors import MissingDependency
from tracely_sdk.store import Store, register_backend

if TYPE_CHECKING:
    from tracely_sdk.server._app import TracelyServer, create_server
    from tracely_sdk.server._config import ServerConfig

__all__ = ["ServerConfig", "TracelyServer", "create_server"]


def _http_store(url: str) -> Store:
    from tracely_sdk.store._http import HTTPStore

    return HTTPStore(url)


def _postgres_store(url: str) -> Store:
    from tracely_sdk.store._postgres import PostgresStore

    return PostgresStore(url)


for _scheme in ("http", "https"):
    register_backend(_scheme, _http_store)
for _scheme in ("postgresql", "postgres"):
    register_backend(_scheme, _postgres_store)

# The packages of the ``server`` extra: without one of them the server cannot run, and the
# user needs the extra's name, not a traceback.
_SERVER_PACKAGES = ("starlette", "uvicorn", "pydantic")

_LAZY = {
    "ServerConfig": "tracely_sdk.server._config",
    "TracelyServer": "tracely_sdk.server._app",
    "create_server": "tracely_sdk.server._app",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    if module == "tracely_sdk.server._app":
        # The server imports parts of these where it uses them; check them all up front, so
        # a missing one is named at start-up rather than at the first request.
        for package in _SERVER_PACKAGES:
            try:
                importlib.import_module(package)
            except ImportError as exc:
                raise MissingDependency(package, "server") from exc
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
