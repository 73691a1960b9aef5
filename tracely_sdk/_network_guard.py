"""The network guard of strict replay: a recorded run opens no connection the recording does not
answer, whatever client the agent uses.

While a strict ``fixtures()`` block is active, one audit hook (PEP 578, ``sys.addaudithook``)
checks every network operation the process makes through Python's socket module:

- ``socket.connect`` / ``connect_ex``: sync sockets, asyncio's ``sock_connect`` (every asyncio
  connection), and every library above them (httpx, requests, urllib3, urllib, aiohttp, ...);
- ``socket.getaddrinfo``, ``gethostbyname``, ``gethostbyname_ex`` of a host name (a name
  lookup; an address literal is no lookup, its connection is checked instead), and the reverse
  lookups ``gethostbyaddr`` and ``getnameinfo`` (its audit event does not say whether the
  numeric flags ask for no lookup, so it is refused either way);
- ``socket.sendto`` / ``sendmsg`` to an address (a datagram needs no connection).

Only IPv4 and IPv6 sockets are checked: a Unix-domain socket is local IPC, not the network.

An operation passes when its host (and port, where the entry names one) is allowed: tracely's
own endpoints (the OpenTelemetry exporter's ``OTEL_EXPORTER_OTLP_*`` endpoints, an
``init(endpoint=...)``, every store and server opened in this process) and the project's
``allow_network`` entries (``HOST`` or ``HOST:PORT``). An entry that is a name also allows the
addresses it resolves to. Loopback is not allowed by default: local model servers live there.

Anything else raises :class:`~tracely_sdk.ReplayError` at the call site and is recorded in the
block's report (``errors`` and ``refused``), so the case is never PASS even if the agent or its
framework swallowed the exception. A context with a block of its own follows that block (a
lenient or live block is not guarded); a context with none (a worker thread, another task) is
guarded by every strict block active in the process, so a thread pool cannot go live either.

Audit hooks cannot be removed: the first strict block installs the hook, once per process, and
with no strict block active it returns after one check. Out of reach: code that opens sockets
without Python's socket module (a C extension calling the C library, e.g. libpq, gRPC's core,
libcurl; on Windows, asyncio's proactor loop), other processes, and the name lookup
``connect(("name", port))`` does inside the C call before its audit event (the connection
itself is still refused).
"""

from __future__ import annotations

import _socket
import contextlib
import contextvars
import functools
import os
import re
import socket
import sys
import sysconfig
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypedDict

from tracely_sdk.errors import ConfigError, ReplayError

__all__ = [
    "ENV_VAR",
    "Endpoint",
    "Guard",
    "Refusal",
    "Rules",
    "allow_own",
    "allow_in_process",
    "endpoints_from",
    "open_scope",
    "parse_endpoint",
]

ENV_VAR = "TRACELY_ALLOW_NETWORK"

# -- endpoints ------------------------------------------------------------------------------

_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?"
_NAME_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*\.?$")
_DEFAULT_PORTS = {"http": 80, "https": 443, "postgresql": 5432, "postgres": 5432, "grpc": 4317}


_MAPPED = bytes(10) + b"\xff\xff"  # the prefix of an IPv4 address mapped into IPv6


@functools.lru_cache(maxsize=1024)  # every check reads it; a process talks to few hosts
def _address(host: str) -> str | None:
    """``host`` as the canonical text of an IP address (IPv4 for a mapped one), or None."""
    with contextlib.suppress(OSError, ValueError):
        return socket.inet_ntop(socket.AF_INET, socket.inet_pton(socket.AF_INET, host))
    try:
        packed = socket.inet_pton(socket.AF_INET6, host.split("%", 1)[0])
    except (OSError, ValueError):
        return None
    if packed.startswith(_MAPPED):
        return socket.inet_ntop(socket.AF_INET, packed[12:])
    return socket.inet_ntop(socket.AF_INET6, packed)


def _normal_host(host: str) -> str:
    return _address(host) or host.lower().rstrip(".")


@dataclass(frozen=True)
class Endpoint:
    """A host replay may reach: a name or address, on one port or (``port`` None) any."""

    host: str
    port: int | None = None

    def __str__(self) -> str:
        return _target(self.host, self.port)

    def admits(self, host: str, port: int | None) -> bool:
        """Whether a host (normalised) and port (None: a lookup that names none) is this one."""
        return host == self.host and self.admits_port(port)

    def admits_port(self, port: int | None) -> bool:
        return self.port is None or port is None or port == self.port


def _target(host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


def parse_endpoint(text: str, source: str) -> Endpoint:
    """``HOST``, ``HOST:PORT`` or ``[IPV6]:PORT`` as an Endpoint; ConfigError naming ``source``."""
    raw = text.strip()
    host, port_text = raw, ""
    if raw.startswith("["):
        host, sep, rest = raw[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            host = ""
        port_text = rest[1:]
    elif raw.count(":") == 1:
        host, _, port_text = raw.partition(":")
    port: int | None = None
    if port_text or raw.endswith(":"):
        port = int(port_text) if port_text.isdigit() else -1
    address = _address(host)
    if (address is None and not _NAME_RE.match(host)) or (
        port is not None and not 0 < port < 65536
    ):
        raise ConfigError(
            f"{source}: {text!r} is not a host to allow; use HOST or HOST:PORT, e.g. "
            "db.internal:5432, 127.0.0.1:8000 or [::1]:8000"
        )
    return Endpoint(_normal_host(host), port)


def endpoints_from(value: Any, source: str) -> tuple[Endpoint, ...]:
    """The ``allow_network`` setting: a list, or a comma-separated string, of HOST[:PORT]."""
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    endpoints = []
    for item in items:
        if isinstance(item, Endpoint):
            endpoints.append(item)
            continue
        if not isinstance(item, str):
            raise ConfigError(f"{source}: {item!r} is not a host; use HOST or HOST:PORT strings")
        if item.strip():
            endpoints.append(parse_endpoint(item, source))
    return tuple(dict.fromkeys(endpoints))


def _url_endpoint(url: str) -> Endpoint | None:
    """The host and port a URL (``http://collector:4318``, ``postgresql://db/x``) connects to."""
    text = url.strip()
    if "://" not in text:
        text = "grpc://" + text  # an OTLP/gRPC endpoint may be a bare host:port
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    port = port or _DEFAULT_PORTS.get(parts.scheme.lower())
    if not host or port is None:
        return None  # a scheme whose port is not known: allowing every port would be too much
    return Endpoint(_normal_host(host), port)


# tracely's own endpoints opened in this process (stores, servers, an explicit OTLP endpoint);
# a tuple replaced whole, so the hook reads it without a lock.
_own: tuple[Endpoint, ...] = ()
_own_lock = threading.Lock()

_OTLP_VARS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
)


def allow_own(url: str) -> None:
    """Let strict replay reach ``url``'s host and port: a store or server tracely opened."""
    global _own
    endpoint = _url_endpoint(url) if isinstance(url, str) else None
    if endpoint is None or endpoint in _own:
        return
    with _own_lock:
        if endpoint not in _own:
            _own = (*_own, endpoint)


def _exporter_endpoints() -> list[Endpoint]:
    """The OpenTelemetry exporter's endpoints, from the standard variables."""
    env = os.environ
    urls = [url for var in _OTLP_VARS if (url := env.get(var, "").strip())]
    found = [e for url in urls if (e := _url_endpoint(url)) is not None]
    exporters = (env.get("OTEL_TRACES_EXPORTER") or "").lower()
    if "otlp" in exporters and not found:  # the exporter's defaults
        found += [Endpoint("localhost", 4318), Endpoint("localhost", 4317)]
    return found


def allow_in_process(values: Sequence[str], source: str) -> str | None:
    """Make ``values`` (``--allow-network``) this process's ``allow_network`` and its children's.

    Validated first (ConfigError naming ``source``); returns the previous ``TRACELY_ALLOW_NETWORK``
    so a caller that must can put it back. The environment carries the setting to worker
    processes and to every ``fixtures()`` block of the process without an argument of its own.
    """
    endpoints = endpoints_from(list(values), source)
    previous = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = ",".join(str(e) for e in endpoints)
    return previous


# -- resolving allowed names ----------------------------------------------------------------

# name -> the addresses it resolved to, learned on the refusal path only: a connection to an
# address is compared with the names allowed, looked up again when it matches none.
_resolved: dict[str, frozenset[str]] = {}


def _lookup(name: str) -> frozenset[str]:
    try:
        infos = socket.getaddrinfo(name, None)
    except (OSError, UnicodeError):
        return frozenset()
    found = frozenset(a for info in infos if (a := _address(str(info[4][0]))) is not None)
    _resolved[name] = found
    return found


def _resolves_to(address: str, port: int | None, allowed: Iterable[Endpoint]) -> bool:
    names = [e.host for e in allowed if _address(e.host) is None and e.admits_port(port)]
    if any(address in _resolved.get(name, ()) for name in names):
        return True
    return any(address in _lookup(name) for name in names)


# -- the guard ------------------------------------------------------------------------------


class Refusal(TypedDict):
    """One network operation strict replay refused (``rep.refused``)."""

    event: str  # the audit event: socket.connect, socket.getaddrinfo, ...
    host: str
    port: int | None
    library: str  # the library that asked, and those it went through
    at: str | None  # file:line of the code that called the library (None: none on the stack)
    thread: str


class Rules:
    """The hosts strict blocks allow: the project's ``allowed`` and the exporter's endpoints as
    the environment names them now. Made once for a run of many cases; a store opened later
    (``_own``) is read at each check."""

    __slots__ = ("allowed", "ports")

    def __init__(self, allowed: tuple[Endpoint, ...]) -> None:
        self.allowed = tuple(dict.fromkeys([*allowed, *_exporter_endpoints()]))
        self.ports: dict[str, frozenset[int | None]] = {}  # host -> its ports (None: any port)
        for e in self.allowed:
            self.ports[e.host] = self.ports.get(e.host, frozenset()) | {e.port}


class Guard:
    """The network rules of one strict block and the report its refusals go to."""

    def __init__(self, report: Any, allowed: tuple[Endpoint, ...] | Rules) -> None:
        self.report = report
        rules = allowed if isinstance(allowed, Rules) else Rules(allowed)
        self.allowed = rules.allowed
        self._ports = rules.ports
        self.active = False

    def allows(self, host: str, port: int | None) -> bool:
        name = _normal_host(host)
        ports = self._ports.get(name)
        if ports is not None and (port is None or port in ports or None in ports):
            return True
        allowed = (*self.allowed, *_own)
        if _own and any(e.admits(name, port) for e in _own):
            return True
        return _address(name) is not None and _resolves_to(name, port, allowed)

    def record(self, error: ReplayError, refusal: Refusal) -> None:
        self.report.errors.append(error)
        self.report.refused.append(refusal)

    def __enter__(self) -> Guard:
        global _guards
        _install()
        with _guards_lock:
            _guards = (*_guards, self)
        self.active = True
        self._token = _scope.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        global _guards
        _scope.reset(self._token)
        self.active = False
        with _guards_lock:
            _guards = tuple(g for g in _guards if g is not self)


class _Open:
    """The scope of a lenient or live block: nothing is guarded in it."""


_OPEN = _Open()
_scope: contextvars.ContextVar[Guard | _Open | None] = contextvars.ContextVar(
    "tracely_network_scope", default=None
)
_guards: tuple[Guard, ...] = ()  # the strict blocks active in the process
_guards_lock = threading.Lock()


@contextmanager
def open_scope() -> Iterator[None]:
    """A lenient or live block: its context is not guarded, whatever other blocks do."""
    token = _scope.set(_OPEN)
    try:
        yield
    finally:
        _scope.reset(token)


def _guards_here() -> tuple[Guard, ...]:
    scope = _scope.get()
    if scope is _OPEN:
        return ()
    if isinstance(scope, Guard) and scope.active:
        return (scope,)
    return _guards


_WHAT = {
    "socket.connect": "a connection to",
    "socket.sendto": "a datagram to",
    "socket.sendmsg": "a datagram to",
    "socket.getaddrinfo": "a name lookup of",
    "socket.gethostbyname": "a name lookup of",
    "socket.gethostbyaddr": "a reverse lookup of",
    "socket.getnameinfo": "a reverse lookup of",
}


def _decide(event: str, host: str, port: int | None) -> None:
    refusing = [g for g in _guards_here() if not g.allows(host, port)]
    if not refusing:
        return
    library, at = _origin()
    target = _target(_normal_host(host), port)
    thread = threading.current_thread()
    where = f", at {at}" if at else ""
    if thread is not threading.main_thread():
        where += f", in thread {thread.name!r}"
    error = ReplayError(
        f"strict replay refused {_WHAT[event]} {target} ({event} from {library}{where}): the "
        "recording cannot answer it and a recorded run never goes live. Record the call through "
        "a supported client (a patched OpenAI, Anthropic or Google Gen AI SDK, or call_llm), "
        f"wrap it in tracely.call_tool, or allow the host: --allow-network {target} "
        f"({ENV_VAR}, [tool.tracely] allow_network)",
        label=f"network:{target}",
    )
    refusal = Refusal(
        event=event,
        host=_normal_host(host),
        port=port,
        library=library,
        at=at,
        thread=thread.name,
    )
    for guard in refusing:
        guard.record(error, refusal)
    raise error


def _port(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        try:
            return socket.getservbyname(value)
        except OSError:
            return None
    return None


def _text(host: Any) -> str | None:
    if isinstance(host, bytes):
        return host.decode("idna", "replace") if host else None
    return host if isinstance(host, str) and host else None


_INET = (socket.AF_INET, socket.AF_INET6)


_family = _socket.socket.family.__get__  # the plain int: socket.socket's property makes an enum


def _on_socket(event: str, args: tuple[Any, ...]) -> None:
    sock, address = args[0], args[1]
    if not isinstance(address, tuple) or _family(sock) not in _INET:
        return
    host = _text(address[0]) if address else None
    if host is not None:
        _decide("socket.sendto" if event == "socket.sendmsg" else event, host, _port(address[1]))


def _on_lookup(event: str, args: tuple[Any, ...]) -> None:
    host = _text(args[0]) if args else None
    if host is None or _address(host) is not None:
        return  # no lookup: the connection to the address is what gets checked
    port = _port(args[1]) if event == "socket.getaddrinfo" and len(args) > 1 else None
    _decide(event, host, port)


def _on_reverse(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.getnameinfo":  # the event does not carry the flags: numeric or not
        sockaddr = args[0] if args else None
        host = _text(sockaddr[0]) if isinstance(sockaddr, tuple) and sockaddr else None
    else:
        host = _text(args[0]) if args else None
    if host is not None:
        _decide(event, host, None)


_CHECKS: dict[str, Callable[[str, tuple[Any, ...]], None]] = {
    "socket.connect": _on_socket,
    "socket.sendto": _on_socket,
    "socket.sendmsg": _on_socket,
    "socket.getaddrinfo": _on_lookup,
    "socket.gethostbyname": _on_lookup,
    "socket.gethostbyaddr": _on_reverse,
    "socket.getnameinfo": _on_reverse,
}
_local = threading.local()  # the hook's own lookups and stack walk must not re-enter it


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _guards:
        return
    check = _CHECKS.get(event)
    if check is None or getattr(_local, "busy", False):
        return
    _local.busy = True
    try:
        check(event, args)
    finally:
        _local.busy = False


_installed = False
_install_lock = threading.Lock()


def _install() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            sys.addaudithook(_audit)
            _installed = True


# -- naming the caller ----------------------------------------------------------------------

_LIBRARY_DIRS = tuple(
    {
        os.path.normcase(p)
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_paths().get(key))
    }
)
_PLUMBING = frozenset({"threading", "concurrent", "contextvars", "runpy", "selectors", "socket"})


def _is_library(filename: str) -> bool:
    path = os.path.normcase(filename)
    return (
        filename.startswith("<frozen ")
        or path.startswith(_LIBRARY_DIRS)
        or any(part in path for part in ("site-packages", "dist-packages"))
    )


def _origin() -> tuple[str, str | None]:
    """The library that asked for the operation (and those it went through, innermost last),
    and the file:line of the code that called it, read from the stack."""
    frame: FrameType | None = sys._getframe(1)
    packages: list[str] = []
    at = None
    while frame is not None:
        module = str(frame.f_globals.get("__name__") or "")
        if module.startswith("tracely_sdk.providers"):
            pass  # a patch the call passed through on its way down: the caller is above it
        elif module.startswith(("tracely_sdk", "tracely_otel")):
            if module != __name__:
                break  # tracely called the code that asked: the search ends here
        elif _is_library(frame.f_code.co_filename):
            top = module.partition(".")[0] or "?"
            if top not in packages:
                packages.append(top)
        else:
            at = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
            break
        frame = frame.f_back
    named = [p for p in packages if p not in _PLUMBING] or packages[:1] or ["socket"]
    outer, inner = named[-1], named[:-1]
    return (f"{outer} (via {', '.join(reversed(inner))})" if inner else outer), at
