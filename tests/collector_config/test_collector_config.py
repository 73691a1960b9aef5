"""Static checks of collector-config/: the Collector, Tempo, Grafana and compose files.

No collector binary runs here, so the Collector configuration is checked against a
table of the components it uses and the configuration keys their documentation
lists. A key that is not in the table is an error: either it is a typo the Collector
would reject at startup, or the table needs a new row with the document it came from.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "collector-config"
OTELCOL = CONFIG_DIR / "otelcol.yaml"
OTELCOL_LOAD_BALANCING = CONFIG_DIR / "otelcol-loadbalancing.yaml"
TEMPO = CONFIG_DIR / "tempo.yaml"
COMPOSE = CONFIG_DIR / "docker-compose.yml"
GRAFANA_DATASOURCES = CONFIG_DIR / "grafana-datasources.yaml"

TOKEN_HEADER = "Bearer ${env:TRACELY_INGEST_TOKEN}"

# ---------------------------------------------------------------------------
# Documented configuration keys.
#
# A schema is a dict of documented keys. Each value is one of:
#   LEAF        a scalar setting (any value),
#   FREE_MAP    a mapping whose keys are user-chosen (e.g. HTTP header names),
#   a dict      a nested block, itself a schema,
#   [schema]    a list whose items follow schema.
# ---------------------------------------------------------------------------

LEAF = "leaf"
FREE_MAP = "free-map"

# config/configtls/README.md (open-telemetry/opentelemetry-collector): client side.
TLS_CLIENT = {
    "insecure": LEAF,
    "insecure_skip_verify": LEAF,
    "ca_file": LEAF,
    "ca_pem": LEAF,
    "cert_file": LEAF,
    "cert_pem": LEAF,
    "key_file": LEAF,
    "key_pem": LEAF,
    "include_system_ca_certs_pool": LEAF,
    "min_version": LEAF,
    "max_version": LEAF,
    "cipher_suites": LEAF,
    "curve_preferences": LEAF,
    "reload_interval": LEAF,
    "server_name_override": LEAF,
}

# config/configtls/README.md: server side.
TLS_SERVER = {
    **{k: v for k, v in TLS_CLIENT.items() if k not in {"insecure", "server_name_override"}},
    "client_ca_file": LEAF,
    "client_ca_file_reload": LEAF,
}

# exporter/exporterhelper/README.md (open-telemetry/opentelemetry-collector),
# "Retry on Failure" and "Sending Queue"; randomization_factor is in
# exporter/otlphttpexporter/testdata/config.yaml.
RETRY_ON_FAILURE = {
    "enabled": LEAF,
    "initial_interval": LEAF,
    "max_interval": LEAF,
    "max_elapsed_time": LEAF,
    "multiplier": LEAF,
    "randomization_factor": LEAF,
}
SENDING_QUEUE = {
    "enabled": LEAF,
    "num_consumers": LEAF,
    "wait_for_result": LEAF,
    "block_on_overflow": LEAF,
    "sizer": LEAF,
    "queue_size": LEAF,
    "storage": LEAF,
    "batch": {"flush_timeout": LEAF, "min_size": LEAF, "max_size": LEAF, "sizer": LEAF},
}

# config/configgrpc/README.md, "Server Configuration" (plus `endpoint` and
# `transport` from receiver/otlpreceiver/README.md and config.md).
GRPC_SERVER = {
    "endpoint": LEAF,
    "transport": LEAF,
    "tls": TLS_SERVER,
    "max_recv_msg_size_mib": LEAF,
    "max_concurrent_streams": LEAF,
    "read_buffer_size": LEAF,
    "write_buffer_size": LEAF,
    "keepalive": {
        "enforcement_policy": {"min_time": LEAF, "permit_without_stream": LEAF},
        "server_parameters": {
            "max_connection_age": LEAF,
            "max_connection_age_grace": LEAF,
            "max_connection_idle": LEAF,
            "time": LEAF,
            "timeout": LEAF,
        },
    },
    "auth": {"authenticator": LEAF},
    "include_metadata": LEAF,
    "middlewares": LEAF,
}

# config/confighttp/README.md, "Server Configuration"; *_url_path from
# receiver/otlpreceiver/README.md.
HTTP_SERVER = {
    "endpoint": LEAF,
    "tls": TLS_SERVER,
    "cors": {"allowed_origins": LEAF, "allowed_headers": LEAF, "max_age": LEAF},
    "max_request_body_size": LEAF,
    "include_metadata": LEAF,
    "response_headers": FREE_MAP,
    "compression_algorithms": LEAF,
    "read_timeout": LEAF,
    "read_header_timeout": LEAF,
    "write_timeout": LEAF,
    "idle_timeout": LEAF,
    "keep_alives_enabled": LEAF,
    "auth": {"authenticator": LEAF, "request_params": LEAF},
    "middlewares": LEAF,
    "traces_url_path": LEAF,
    "metrics_url_path": LEAF,
    "logs_url_path": LEAF,
    "profiles_url_path": LEAF,
}

# exporter/otlpexporter/README.md ("OTLP gRPC Exporter", type `otlp_grpc` since
# v0.144.0) + config/configgrpc/README.md "Client Configuration" + exporterhelper.
OTLP_GRPC_EXPORTER = {
    "endpoint": LEAF,
    "tls": TLS_CLIENT,
    "headers": FREE_MAP,
    "compression": LEAF,
    "balancer_name": LEAF,
    "keepalive": {"permit_without_stream": LEAF, "time": LEAF, "timeout": LEAF},
    "read_buffer_size": LEAF,
    "write_buffer_size": LEAF,
    "auth": {"authenticator": LEAF},
    "middlewares": LEAF,
    "timeout": LEAF,
    "retry_on_failure": RETRY_ON_FAILURE,
    "sending_queue": SENDING_QUEUE,
}

# exporter/otlphttpexporter/README.md ("OTLP HTTP Exporter", type `otlp_http`
# since v0.144.0) + config/confighttp/README.md "Client Configuration" +
# exporterhelper; example keys in exporter/otlphttpexporter/testdata/config.yaml.
OTLP_HTTP_EXPORTER = {
    "endpoint": LEAF,
    "traces_endpoint": LEAF,
    "metrics_endpoint": LEAF,
    "logs_endpoint": LEAF,
    "profiles_endpoint": LEAF,
    "encoding": LEAF,
    "proxy_url": LEAF,
    "tls": TLS_CLIENT,
    "headers": FREE_MAP,
    "compression": LEAF,
    "compression_params": {"level": LEAF},
    "timeout": LEAF,
    "read_buffer_size": LEAF,
    "write_buffer_size": LEAF,
    "max_idle_conns": LEAF,
    "max_idle_conns_per_host": LEAF,
    "max_conns_per_host": LEAF,
    "idle_conn_timeout": LEAF,
    "disable_keep_alives": LEAF,
    "force_attempt_http2": LEAF,
    "http2_read_idle_timeout": LEAF,
    "http2_ping_timeout": LEAF,
    "cookies": {"enabled": LEAF},
    "auth": {"authenticator": LEAF},
    "middlewares": LEAF,
    "retry_on_failure": RETRY_ON_FAILURE,
    "sending_queue": SENDING_QUEUE,
}

# exporter/loadbalancingexporter/README.md (open-telemetry/opentelemetry-collector-contrib;
# type `load_balancing` since v0.154.0): `protocol.otlp` takes every otlp_grpc exporter
# setting but `endpoint`; one resolver (static, dns, k8s or aws_cloud_map); and the
# exporterhelper's timeout, sending_queue and retry_on_failure.
LOAD_BALANCING_EXPORTER = {
    "routing_key": LEAF,
    "routing_attributes": LEAF,
    "protocol": {"otlp": {k: v for k, v in OTLP_GRPC_EXPORTER.items() if k != "endpoint"}},
    "resolver": {
        "static": {"hostnames": LEAF},
        "dns": {"hostname": LEAF, "port": LEAF, "interval": LEAF, "timeout": LEAF},
        "k8s": {"service": LEAF, "ports": LEAF, "timeout": LEAF, "return_hostnames": LEAF},
        "aws_cloud_map": LEAF,
    },
    "timeout": LEAF,
    "retry_on_failure": RETRY_ON_FAILURE,
    "sending_queue": SENDING_QUEUE,
}

# Component type -> schema, per kind. Sources:
#   receivers.otlp        receiver/otlpreceiver/README.md, config.md
#   processors.memory_limiter  processor/memorylimiterprocessor/README.md
#   processors.batch      processor/batchprocessor/README.md
#   exporters.otlp_grpc   exporter/otlpexporter/README.md
#   exporters.otlp_http   exporter/otlphttpexporter/README.md
#   exporters.load_balancing  open-telemetry/opentelemetry-collector-contrib
#                         exporter/loadbalancingexporter/README.md
#   extensions.health_check  open-telemetry/opentelemetry-collector-contrib
#                         extension/healthcheckextension/README.md
# (all in open-telemetry/opentelemetry-collector unless noted).
COMPONENTS: dict[str, dict[str, Any]] = {
    "receivers": {
        "otlp": {"protocols": {"grpc": GRPC_SERVER, "http": HTTP_SERVER}},
    },
    "processors": {
        "memory_limiter": {
            "check_interval": LEAF,
            "limit_mib": LEAF,
            "spike_limit_mib": LEAF,
            "limit_percentage": LEAF,
            "spike_limit_percentage": LEAF,
        },
        "batch": {
            "send_batch_size": LEAF,
            "timeout": LEAF,
            "send_batch_max_size": LEAF,
            "metadata_keys": LEAF,
            "metadata_cardinality_limit": LEAF,
        },
    },
    "exporters": {
        "otlp_grpc": OTLP_GRPC_EXPORTER,
        "otlp_http": OTLP_HTTP_EXPORTER,
        "load_balancing": LOAD_BALANCING_EXPORTER,
    },
    "extensions": {
        "health_check": {
            **{k: v for k, v in HTTP_SERVER.items() if not k.endswith("_url_path")},
            "path": LEAF,
            "response_body": LEAF,
            "check_collector_pipeline": {
                "enabled": LEAF,
                "interval": LEAF,
                "exporter_failure_threshold": LEAF,
            },
        },
    },
}

# Deprecated aliases (collector v0.144.0, PRs #14397 and #14403) and removed
# components: rejected with a pointer to the current name.
DEPRECATED_TYPES = {
    ("exporters", "otlp"): "otlp_grpc",
    ("exporters", "otlphttp"): "otlp_http",
    ("exporters", "loadbalancing"): "load_balancing",  # v0.154.0
}
REMOVED_TYPES = {
    ("exporters", "jaeger"): "removed from otelcol-contrib; send OTLP to Jaeger (otlp_grpc)",
    ("exporters", "jaeger_thrift"): "removed from otelcol-contrib; send OTLP to Jaeger",
}

# service::telemetry, https://opentelemetry.io/docs/collector/internal-telemetry/
SERVICE_TELEMETRY = {
    "resource": FREE_MAP,
    "logs": {
        "level": LEAF,
        "encoding": LEAF,
        "development": LEAF,
        "disable_caller": LEAF,
        "disable_stacktrace": LEAF,
        "output_paths": LEAF,
        "error_output_paths": LEAF,
        "initial_fields": FREE_MAP,
        "sampling": LEAF,
        "processors": LEAF,
    },
    "metrics": {
        "level": LEAF,
        "readers": [
            {
                "pull": {"exporter": {"prometheus": {"host": LEAF, "port": LEAF}}},
                "periodic": LEAF,
            }
        ],
        "views": LEAF,
    },
    "traces": {"level": LEAF, "processors": LEAF, "propagators": LEAF},
}

TOP_LEVEL = {"receivers", "processors", "exporters", "extensions", "connectors", "service"}
SERVICE_KEYS = {"extensions", "pipelines", "telemetry"}
PIPELINE_KEYS = {"receivers", "processors", "exporters"}
KIND_IN_PIPELINE = {"receivers": "receivers", "processors": "processors", "exporters": "exporters"}

# `${env:NAME}` is the documented form
# (https://opentelemetry.io/docs/collector/configuration/#environment-variables);
# bare `$NAME` expansion was removed, and this project spells the provider out.
ENV_REF = re.compile(r"\$\{env:[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}")
BARE_DOLLAR = re.compile(r"(?<!\$)\$(?!\$|\{env:)")


def component_type(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def check_keys(value: Any, schema: Any, where: str) -> list[str]:
    """Every key used in value must be documented in schema, recursively."""
    if schema in (LEAF, FREE_MAP):
        return []
    errors: list[str] = []
    if isinstance(schema, list):
        if not isinstance(value, list):
            return [f"{where}: expected a list"]
        for i, item in enumerate(value):
            errors += check_keys(item, schema[0], f"{where}[{i}]")
        return errors
    if value is None:  # `grpc:` with no settings uses the defaults
        return []
    if not isinstance(value, dict):
        return [f"{where}: expected a mapping, got {type(value).__name__}"]
    for key, sub in value.items():
        if key not in schema:
            errors.append(f"{where}.{key}: not a documented setting")
        else:
            errors += check_keys(sub, schema[key], f"{where}.{key}")
    return errors


def iter_strings(value: Any, where: str):
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from iter_strings(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from iter_strings(v, f"{where}[{i}]")


def is_tracely_exporter(component_id: str, cfg: Any) -> bool:
    endpoint = str((cfg or {}).get("endpoint", "")) + str((cfg or {}).get("traces_endpoint", ""))
    return "tracely" in component_id.split("/", 1)[-1] or "//tracely:" in endpoint


def endpoint_port(endpoint: str) -> int:
    return int(endpoint.rstrip("/").rsplit(":", 1)[1].split("/", 1)[0])


def check_collector_config(cfg: Any) -> list[str]:
    """Return every problem found in a parsed otelcol config (empty list: valid)."""
    if not isinstance(cfg, dict):
        return ["config is not a mapping"]
    errors = [f"{k}: unknown top-level section" for k in cfg if k not in TOP_LEVEL]

    defined: dict[str, set[str]] = {}
    for kind, table in COMPONENTS.items():
        section = cfg.get(kind) or {}
        defined[kind] = set(section)
        for cid, ccfg in section.items():
            ctype = component_type(cid)
            if (kind, ctype) in DEPRECATED_TYPES:
                errors.append(
                    f"{kind}.{cid}: `{ctype}` is a deprecated alias, use "
                    f"`{DEPRECATED_TYPES[(kind, ctype)]}`"
                )
            elif (kind, ctype) in REMOVED_TYPES:
                errors.append(f"{kind}.{cid}: {REMOVED_TYPES[(kind, ctype)]}")
            elif ctype not in table:
                errors.append(f"{kind}.{cid}: component type `{ctype}` is not in the table")
            else:
                errors += check_keys(ccfg, table[ctype], f"{kind}.{cid}")

    # Environment references: only the ${env:NAME} form.
    for where, text in iter_strings(cfg, "config"):
        stripped = ENV_REF.sub("", text)
        if BARE_DOLLAR.search(stripped):
            errors.append(f"{where}: use ${{env:NAME}}, not $NAME or ${{NAME}}: {text!r}")

    service = cfg.get("service") or {}
    errors += [f"service.{k}: unknown key" for k in service if k not in SERVICE_KEYS]
    errors += check_keys(service.get("telemetry"), SERVICE_TELEMETRY, "service.telemetry")

    used: dict[str, set[str]] = {kind: set() for kind in COMPONENTS}
    for ext in service.get("extensions") or []:
        used["extensions"].add(ext)
        if ext not in defined["extensions"]:
            errors.append(f"service.extensions: `{ext}` is not defined")

    pipelines = service.get("pipelines") or {}
    if not pipelines:
        errors.append("service.pipelines: no pipelines")
    exporter_pipelines: dict[str, list[str]] = {}
    for name, pipe in pipelines.items():
        where = f"service.pipelines.{name}"
        if component_type(name) != "traces":
            errors.append(f"{where}: only traces pipelines are expected")
        pipe = pipe or {}
        errors += [f"{where}.{k}: unknown key" for k in pipe if k not in PIPELINE_KEYS]
        for key, kind in KIND_IN_PIPELINE.items():
            for cid in pipe.get(key) or []:
                used[kind].add(cid)
                if cid not in defined[kind]:
                    errors.append(f"{where}.{key}: `{cid}` is not defined under {kind}")
        if not pipe.get("receivers"):
            errors.append(f"{where}: no receivers")
        processors = pipe.get("processors") or []
        if not processors or component_type(processors[0]) != "memory_limiter":
            errors.append(f"{where}: memory_limiter must be the first processor")
        exporters = pipe.get("exporters") or []
        if len(exporters) != 1:
            errors.append(f"{where}: expected exactly one exporter (one pipeline per backend)")
        for cid in exporters:
            exporter_pipelines.setdefault(cid, []).append(name)

    for kind in COMPONENTS:
        for cid in sorted(defined[kind] - used[kind]):
            errors.append(f"{kind}.{cid}: defined but not used")
    for cid, names in exporter_pipelines.items():
        if len(names) > 1:
            errors.append(f"exporters.{cid}: shared by pipelines {names}")

    exporters_cfg = cfg.get("exporters") or {}
    tracely = [cid for cid, c in exporters_cfg.items() if is_tracely_exporter(cid, c)]
    if not tracely:
        errors.append("exporters: no exporter sends to the tracely server")
    for cid in tracely:
        c = exporters_cfg[cid] or {}
        headers = _client_settings(cid, c).get("headers") or {}
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        if auth != TOKEN_HEADER:
            errors.append(f"exporters.{cid}: Authorization header must be {TOKEN_HEADER!r}")
        if component_type(cid) not in ("otlp_http", "otlp_grpc", "load_balancing"):
            errors.append(f"exporters.{cid}: the tracely server takes OTLP/HTTP or OTLP/gRPC")
        if str(c.get("endpoint", "")).rstrip("/").endswith("/v1/traces"):
            errors.append(f"exporters.{cid}: endpoint gets /v1/traces appended; give the base URL")
        if component_type(cid) == "load_balancing":
            errors += _check_load_balancing(cid, c)
    for cid, c in exporters_cfg.items():
        c = c or {}
        if (c.get("sending_queue") or {}).get("block_on_overflow"):
            errors.append(f"exporters.{cid}: a blocking queue stalls every pipeline")
        endpoint = str(c.get("endpoint", ""))
        grpc = component_type(cid) in ("otlp_grpc", "load_balancing")
        plaintext = grpc and not endpoint.startswith("https://")
        if plaintext and not (_client_settings(cid, c).get("tls") or {}).get("insecure"):
            errors.append(f"exporters.{cid}: plaintext gRPC endpoint needs tls.insecure: true")
    return errors


def _client_settings(component_id: str, cfg: dict) -> dict:
    """The settings of the client that sends: load_balancing keeps them under protocol.otlp."""
    if component_type(component_id) == "load_balancing":
        return ((cfg.get("protocol") or {}).get("otlp")) or {}
    return cfg


def _check_load_balancing(cid: str, cfg: dict) -> list[str]:
    """Whole traces to tracely servers' OTLP/gRPC receivers (port 4317)."""
    errors: list[str] = []
    if cfg.get("routing_key", "traceID") != "traceID":
        errors.append(f"exporters.{cid}: routing_key must be traceID, so a trace stays whole")
    resolver = cfg.get("resolver") or {}
    if len(resolver) != 1:
        errors.append(f"exporters.{cid}: configure exactly one resolver")
    hostnames = (resolver.get("static") or {}).get("hostnames") or []
    ports = [endpoint_port(h) for h in hostnames]
    if "dns" in resolver:
        ports.append(int((resolver["dns"] or {}).get("port", 4317)))
    if not ports or any(port != 4317 for port in ports):
        errors.append(f"exporters.{cid}: backends are tracely's OTLP/gRPC receivers, port 4317")
    return errors


# ---------------------------------------------------------------------------
# Tempo. Keys from grafana/tempo docs/sources/tempo/configuration and the
# monolithic examples (example/docker-compose/shared/tempo.yaml,
# docs/sources/tempo/set-up-for-tracing/setup-tempo/deploy/locally/linux.md).
# ---------------------------------------------------------------------------

TEMPO_SCHEMA = {
    "stream_over_http_enabled": LEAF,
    "target": LEAF,
    "server": {"http_listen_port": LEAF, "grpc_listen_port": LEAF, "log_level": LEAF},
    "distributor": {
        "receivers": {"otlp": {"protocols": {"grpc": GRPC_SERVER, "http": HTTP_SERVER}}}
    },
    "ingester": {"max_block_duration": LEAF, "complete_block_timeout": LEAF},
    "compactor": {"compaction": {"block_retention": LEAF}},
    "storage": {
        "trace": {
            "backend": LEAF,
            "wal": {"path": LEAF},
            "local": {"path": LEAF},
        }
    },
    "usage_report": {"reporting_enabled": LEAF},
}


def check_tempo_config(cfg: Any) -> list[str]:
    errors = check_keys(cfg, TEMPO_SCHEMA, "tempo")
    if errors:
        return errors
    if cfg.get("server", {}).get("http_listen_port") != 3200:
        errors.append("tempo.server.http_listen_port must be 3200")
    grpc = cfg["distributor"]["receivers"]["otlp"]["protocols"].get("grpc") or {}
    if not str(grpc.get("endpoint", "")).startswith("0.0.0.0:"):
        errors.append("tempo distributor OTLP gRPC must listen on 0.0.0.0 inside the container")
    trace = cfg["storage"]["trace"]
    if trace.get("backend") != "local" or not trace.get("local", {}).get("path"):
        errors.append("tempo.storage.trace: expected the local backend with a path")
    if not trace.get("wal", {}).get("path"):
        errors.append("tempo.storage.trace.wal.path is required")
    return errors


# ---------------------------------------------------------------------------
# Compose.
# ---------------------------------------------------------------------------

REQUIRED_SERVICES = {"otel-collector", "jaeger", "tempo", "tracely"}


def container_ports(service: dict) -> dict[int, int]:
    """container port -> host port, from short-syntax `ports` entries."""
    out = {}
    for entry in service.get("ports") or []:
        parts = str(entry).split("/")[0].split(":")
        out[int(parts[-1])] = int(parts[-2]) if len(parts) > 1 else int(parts[-1])
    return out


def bind_mounts(service: dict) -> list[tuple[str, str]]:
    mounts = []
    for entry in service.get("volumes") or []:
        source, target = str(entry).split(":")[:2]
        if source.startswith((".", "/")):
            mounts.append((source, target))
    return mounts


def check_compose(compose: Any, otelcol: Any, tempo: Any, base: Path) -> list[str]:
    errors: list[str] = []
    services = compose.get("services") or {}
    errors += [f"services.{s}: missing" for s in sorted(REQUIRED_SERVICES - set(services))]
    if errors:
        return errors
    declared_volumes = set(compose.get("volumes") or {})

    for name, svc in services.items():
        image = str(svc.get("image", ""))
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
        if svc.get("build"):
            pass  # built from this repository, not pulled
        elif not tag or tag == "latest" or not re.search(r"\d", tag):
            errors.append(f"services.{name}.image: pin a released version tag: {image!r}")
        for source, target in bind_mounts(svc):
            if not (base / source).exists():
                errors.append(f"services.{name}.volumes: {source} -> {target} does not exist")
        for entry in svc.get("volumes") or []:
            source = str(entry).split(":")[0]
            if not source.startswith((".", "/")) and source not in declared_volumes:
                errors.append(f"services.{name}.volumes: named volume {source} not declared")

    col = services["otel-collector"]
    mounted = {t: s for s, t in bind_mounts(col)}
    config_target = "/etc/otelcol-contrib/config.yaml"
    if (base / mounted.get(config_target, "")).resolve() != OTELCOL.resolve():
        errors.append("otel-collector must mount otelcol.yaml at " + config_target)
    if not str(col.get("image", "")).startswith("otel/opentelemetry-collector-contrib:"):
        errors.append("otel-collector must run otel/opentelemetry-collector-contrib")
    published = container_ports(col)
    protocols = otelcol["receivers"]["otlp"]["protocols"]
    for proto in ("grpc", "http"):
        port = endpoint_port(protocols[proto]["endpoint"])
        if published.get(port) != port:
            errors.append(f"otel-collector: receiver {proto} port {port} is not published as-is")
    env = col.get("environment") or {}
    if "TRACELY_INGEST_TOKEN" not in env:
        errors.append("otel-collector: TRACELY_INGEST_TOKEN is not passed to the collector")

    # Every exporter targets a compose service on a port that service serves.
    tempo_grpc_port = endpoint_port(
        tempo["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    )
    jaeger_cmd = " ".join(map(str, services["jaeger"].get("command") or []))
    jaeger_otlp = {
        int(p) for p in re.findall(r"otlp\.protocols\.\w+\.endpoint=0\.0\.0\.0:(\d+)", jaeger_cmd)
    }
    served = {"jaeger": jaeger_otlp, "tempo": {tempo_grpc_port}}
    tracely = services["tracely"]
    command = " ".join(map(str, tracely.get("command") or []))
    port_flag = re.search(r"--port\s+(\d+)", command)
    tracely_port = int(port_flag.group(1)) if port_flag else None
    served["tracely"] = {tracely_port}
    for cid, c in (otelcol.get("exporters") or {}).items():
        endpoint = str(c.get("endpoint", ""))
        host = re.sub(r"^\w+://", "", endpoint).split(":", 1)[0]
        if host not in services:
            errors.append(f"exporters.{cid}: host {host!r} is not a compose service")
        elif endpoint_port(endpoint) not in served.get(host, set()):
            errors.append(
                f"exporters.{cid}: port {endpoint_port(endpoint)} is not served by {host}"
            )

    # tracely server.
    build = tracely.get("build") or {}
    dockerfile = base / str(build.get("context", "")) / str(build.get("dockerfile", "Dockerfile"))
    if not build or not dockerfile.is_file():
        errors.append("tracely must be built from the repository's Dockerfile")
    else:
        errors.extend(dockerfile_errors(dockerfile))
    if any(str(v).split(":")[1:2] == ["/src"] for v in tracely.get("volumes") or []):
        errors.append("tracely must not mount the source tree: the image holds the built wheel")
    if "serve" not in command:
        errors.append("tracely command must run tracely serve")
    if "--store sqlite:////data/" not in command:
        errors.append("tracely must store in sqlite under /data")
    if not any(
        str(v).split(":")[1:2] == ["/data"] and not str(v).startswith((".", "/"))
        for v in tracely.get("volumes") or []
    ):
        errors.append("tracely must keep /data on a named volume")
    if container_ports(tracely).get(tracely_port) != tracely_port:
        errors.append("tracely: server port is not published as-is")
    tokens = str((tracely.get("environment") or {}).get("TRACELY_SERVER_TOKENS", ""))
    if not re.search(r"(^|,)ingest:\$\{TRACELY_INGEST_TOKEN[:?}]", tokens):
        errors.append("tracely: TRACELY_SERVER_TOKENS must grant ingest to TRACELY_INGEST_TOKEN")
    health = " ".join(map(str, (tracely.get("healthcheck") or {}).get("test") or []))
    if f":{tracely_port}/healthz" not in health:
        errors.append("tracely: healthcheck must probe /healthz on the server port")

    # Tempo and Jaeger.
    tempo_svc = services["tempo"]
    if not any((base / s).resolve() == TEMPO.resolve() for s, _ in bind_mounts(tempo_svc)):
        errors.append("tempo must mount tempo.yaml")
    tempo_port = tempo["server"]["http_listen_port"]
    if container_ports(tempo_svc).get(tempo_port) != tempo_port:
        errors.append(f"tempo: HTTP port {tempo_port} is not published")
    if container_ports(services["jaeger"]).get(16686) != 16686:
        errors.append("jaeger: UI port 16686 is not published")
    if not str(services["jaeger"].get("image", "")).startswith("jaegertracing/jaeger:2."):
        errors.append("jaeger must run the v2 image jaegertracing/jaeger:2.x")
    return errors


def dockerfile_errors(path: Path) -> list[str]:
    """What keeps a Dockerfile from building the tracely server as users install it."""
    text = path.read_text(encoding="utf-8")
    stages = re.findall(r"^FROM\s+(\S+)", text, re.M)
    errors = []
    if not stages or any(not s.startswith("python:3.") for s in stages):
        errors.append(f"{path.name}: every stage must start from an official python:3.x image")
    if not re.search(r"^COPY\s+\.\s+\.", text, re.M):
        errors.append(f"{path.name}: the build stage must copy this repository")
    if "python -m build --wheel" not in text:
        errors.append(f"{path.name}: the image must be built from the wheel of this repository")
    if (
        not re.search(r"pip install [^\n]*tracely_replay-\*\.whl", text)
        and "${WHEEL}[server" not in text
    ):
        errors.append(f"{path.name}: the wheel must be installed with the server extra")
    if re.search(r"pip install[^\n]*(-e |--editable)", text):
        errors.append(f"{path.name}: the install must not be editable")
    if not re.search(r"^USER\s+(?!root)\S+", text, re.M):
        errors.append(f"{path.name}: the server must not run as root")
    if not re.search(r'^ENTRYPOINT\s+\["tracely"\]', text, re.M):
        errors.append(f"{path.name}: the entrypoint must be the tracely command")
    return errors


# ---------------------------------------------------------------------------
# Fixtures and tests.
# ---------------------------------------------------------------------------


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def otelcol() -> Any:
    return load(OTELCOL)


@pytest.fixture(scope="module")
def tempo() -> Any:
    return load(TEMPO)


@pytest.fixture(scope="module")
def compose() -> Any:
    return load(COMPOSE)


@pytest.fixture(scope="module")
def otelcol_load_balancing() -> Any:
    return load(OTELCOL_LOAD_BALANCING)


def test_load_balancing_config_is_valid(otelcol_load_balancing):
    assert check_collector_config(otelcol_load_balancing) == []


def test_load_balancing_routes_whole_traces_to_tracely_grpc(otelcol_load_balancing):
    exporters = otelcol_load_balancing["exporters"]
    assert list(exporters) == ["load_balancing/tracely"]
    lb = exporters["load_balancing/tracely"]
    assert lb["routing_key"] == "traceID"
    assert lb["resolver"]["dns"] == {
        "hostname": "tracely",
        "port": 4317,
        "interval": "5s",
        "timeout": "1s",
    }
    pipelines = otelcol_load_balancing["service"]["pipelines"]
    assert [p["exporters"] for p in pipelines.values()] == [["load_balancing/tracely"]]


def _load_balancing(key: str, value: Any):
    def mutate(cfg):
        lb = cfg["exporters"]["load_balancing/tracely"]
        if value is None:
            del lb[key]
        else:
            lb[key] = value

    return mutate


def _load_balancing_alias(cfg):
    exporters = cfg["exporters"]
    exporters["loadbalancing/tracely"] = exporters.pop("load_balancing/tracely")
    cfg["service"]["pipelines"]["traces/tracely"]["exporters"] = ["loadbalancing/tracely"]


@pytest.mark.parametrize(
    "mutation",
    [
        pytest.param(_load_balancing("routing_key", "service"), id="routed-by-service"),
        pytest.param(
            _load_balancing("resolver", {"dns": {"hostname": "tracely", "port": 4318}}),
            id="http-port",
        ),
        pytest.param(_load_balancing("resolver", {}), id="no-resolver"),
        pytest.param(_load_balancing("endpoint", "tracely:4317"), id="endpoint-set"),
        pytest.param(
            _load_balancing("protocol", {"otlp": {"tls": {"insecure": True}}}), id="no-token"
        ),
        pytest.param(_load_balancing_alias, id="deprecated-alias"),
    ],
)
def test_broken_load_balancing_config_is_rejected(otelcol_load_balancing, mutation):
    broken = copy.deepcopy(otelcol_load_balancing)
    mutation(broken)
    assert check_collector_config(broken) != []


def test_collector_config_is_valid(otelcol):
    assert check_collector_config(otelcol) == []


def test_receiver_listens_on_standard_ports(otelcol):
    protocols = otelcol["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"


def test_one_pipeline_per_backend(otelcol):
    pipelines = otelcol["service"]["pipelines"]
    by_exporter = {p["exporters"][0]: name for name, p in pipelines.items()}
    assert set(by_exporter) == {"otlp_grpc/jaeger", "otlp_grpc/tempo", "otlp_http/tracely"}
    assert all(p["receivers"] == ["otlp"] for p in pipelines.values())


def test_tracely_exporter_targets_the_otlp_route(otelcol):
    tracely = otelcol["exporters"]["otlp_http/tracely"]
    # otlp_http appends /v1/traces to `endpoint` (exporter/otlphttpexporter/README.md).
    assert tracely["endpoint"] + "/v1/traces" == "http://tracely:8711/v1/traces"
    assert tracely["headers"]["Authorization"] == TOKEN_HEADER
    assert tracely["compression"] == "gzip"
    assert tracely["retry_on_failure"]["enabled"] is True
    assert tracely["sending_queue"]["enabled"] is True


def test_full_queues_fit_under_the_memory_limiter_soft_limit(otelcol):
    # All three queues full must not trip memory_limiter, which refuses data for
    # every pipeline: that would let one stalled backend block the other two.
    limiter = otelcol["processors"]["memory_limiter"]
    soft_limit_mib = limiter["limit_mib"] - limiter["spike_limit_mib"]
    queues = [e["sending_queue"] for e in otelcol["exporters"].values()]
    assert all(q["enabled"] and q["sizer"] == "items" for q in queues)
    queued_spans = sum(q["queue_size"] for q in queues)
    assumed_span_kib = 8
    assert queued_spans * assumed_span_kib / 1024 <= soft_limit_mib


def test_health_check_extension_is_enabled(otelcol):
    assert otelcol["service"]["extensions"] == ["health_check"]
    assert otelcol["extensions"]["health_check"]["endpoint"].endswith(":13133")


def test_tempo_config_is_valid(tempo):
    assert check_tempo_config(tempo) == []


def test_compose_is_consistent(compose, otelcol, tempo):
    assert check_compose(compose, otelcol, tempo, CONFIG_DIR) == []


def test_grafana_datasource_points_at_tempo(compose, tempo):
    datasources = load(GRAFANA_DATASOURCES)["datasources"]
    (ds,) = [d for d in datasources if d["type"] == "tempo"]
    assert ds["url"] == f"http://tempo:{tempo['server']['http_listen_port']}"
    assert "tempo" in compose["services"]


# Each mutation breaks one rule; the checker must reject every one of them.
def _set(path: str, value: Any):
    def mutate(cfg):
        *parents, last = path.split(".")
        node = cfg
        for p in parents:
            node = node[p]
        node[last] = value

    return mutate


def _rename_exporter(old: str, new: str):
    def mutate(cfg):
        cfg["exporters"][new] = cfg["exporters"].pop(old)
        for pipe in cfg["service"]["pipelines"].values():
            pipe["exporters"] = [new if e == old else e for e in pipe["exporters"]]

    return mutate


def _merge_pipelines(cfg):
    pipes = cfg["service"]["pipelines"]
    pipes["traces/jaeger"]["exporters"].append("otlp_grpc/tempo")
    del pipes["traces/tempo"]


def _add_unused_processor(cfg):
    cfg["processors"]["batch/unused"] = {"timeout": "5s"}


def _add_jaeger_exporter(cfg):
    cfg["exporters"]["jaeger"] = {"endpoint": "jaeger:14250"}
    cfg["service"]["pipelines"]["traces/jaeger"]["exporters"] = ["jaeger"]
    del cfg["exporters"]["otlp_grpc/jaeger"]


BROKEN_COLLECTOR = {
    "undocumented key (typo)": _set("exporters.otlp_http/tracely.header", {"x": "y"}),
    "undocumented nested key": _set("exporters.otlp_grpc/tempo.tls.insecur", True),
    "undocumented memory_limiter key": _set("processors.memory_limiter.limit_mb", 400),
    "deprecated $VAR syntax": _set(
        "exporters.otlp_http/tracely.headers.Authorization", "Bearer $TRACELY_INGEST_TOKEN"
    ),
    "braces without env provider": _set(
        "exporters.otlp_http/tracely.headers.Authorization", "Bearer ${TRACELY_INGEST_TOKEN}"
    ),
    "wrong token variable": _set(
        "exporters.otlp_http/tracely.headers.Authorization", "Bearer ${env:OTHER_TOKEN}"
    ),
    "no auth header": _set("exporters.otlp_http/tracely.headers", {}),
    "endpoint already has /v1/traces": _set(
        "exporters.otlp_http/tracely.endpoint", "http://tracely:8711/v1/traces"
    ),
    "plaintext grpc without insecure": _set("exporters.otlp_grpc/jaeger.tls", {}),
    "memory_limiter not first": _set(
        "service.pipelines.traces/tempo.processors", ["batch", "memory_limiter"]
    ),
    "no memory_limiter": _set("service.pipelines.traces/tracely.processors", ["batch"]),
    "undefined exporter": _set("service.pipelines.traces/tempo.exporters", ["otlp_grpc/zipkin"]),
    "undefined extension": _set("service.extensions", ["health_check", "pprof"]),
    "unused processor": _add_unused_processor,
    "shared pipeline": _merge_pipelines,
    "deprecated otlphttp alias": _rename_exporter("otlp_http/tracely", "otlphttp/tracely"),
    "deprecated otlp alias": _rename_exporter("otlp_grpc/tempo", "otlp/tempo"),
    "removed jaeger exporter": _add_jaeger_exporter,
    "unknown telemetry key": _set("service.telemetry.metrics.address", "0.0.0.0:8888"),
    "blocking queue": _set("exporters.otlp_grpc/jaeger.sending_queue.block_on_overflow", True),
}


@pytest.mark.parametrize("mutation", BROKEN_COLLECTOR.values(), ids=BROKEN_COLLECTOR.keys())
def test_broken_collector_config_is_rejected(otelcol, mutation):
    broken = copy.deepcopy(otelcol)
    mutation(broken)
    assert check_collector_config(broken) != []


def _compose_port(service: str, old: str, new: str):
    def mutate(compose):
        ports = compose["services"][service]["ports"]
        compose["services"][service]["ports"] = [new if p == old else p for p in ports]

    return mutate


def _compose_mount(service: str, index: int, value: str):
    def mutate(compose):
        compose["services"][service]["volumes"][index] = value

    return mutate


def _compose_drop(service: str):
    def mutate(compose):
        del compose["services"][service]

    return mutate


def _compose_image(service: str, image: str):
    def mutate(compose):
        compose["services"][service]["image"] = image

    return mutate


def _compose_tokens(value: str):
    def mutate(compose):
        compose["services"]["tracely"]["environment"]["TRACELY_SERVER_TOKENS"] = value

    return mutate


BROKEN_COMPOSE = {
    "collector grpc port remapped": _compose_port("otel-collector", "4317:4317", "14317:4317"),
    "collector http port missing": _compose_port("otel-collector", "4318:4318", "9999:9999"),
    "tracely port not published": _compose_port("tracely", "8711:8711", "8712:8712"),
    "missing config file": _compose_mount(
        "otel-collector", 0, "./otelcol-missing.yaml:/etc/otelcol-contrib/config.yaml:ro"
    ),
    "repo mounted read-write": _compose_mount("tracely", 0, "..:/src"),
    "undeclared named volume": _compose_mount("tracely", 0, "other-data:/data"),
    "tracely from a package index": lambda c: c["services"]["tracely"].pop("build"),
    "no tempo service": _compose_drop("tempo"),
    "unpinned image": _compose_image("jaeger", "jaegertracing/jaeger:latest"),
    "jaeger v1 image": _compose_image("jaeger", "jaegertracing/all-in-one:1.76.0"),
    "no ingest token": _compose_tokens("read:${TRACELY_READ_TOKEN}"),
    "jaeger otlp on localhost": lambda c: c["services"]["jaeger"].pop("command"),
}


@pytest.mark.parametrize("mutation", BROKEN_COMPOSE.values(), ids=BROKEN_COMPOSE.keys())
def test_broken_compose_is_rejected(compose, otelcol, tempo, mutation):
    broken = copy.deepcopy(compose)
    mutation(broken)
    assert check_compose(broken, otelcol, tempo, CONFIG_DIR) != []


def test_exporter_port_must_match_the_service(compose, otelcol, tempo):
    broken = copy.deepcopy(otelcol)
    broken["exporters"]["otlp_http/tracely"]["endpoint"] = "http://tracely:8080"
    assert check_compose(compose, broken, tempo, CONFIG_DIR) != []


@pytest.mark.parametrize(
    "mutation",
    [
        _set("server.http_listen_port", 3100),
        _set("storage.trace.backend", "s3"),
        _set("storage.trace.locl", {"path": "/tmp"}),
        _set("distributor.receivers.otlp.protocols.grpc.endpoint", "localhost:4317"),
    ],
    ids=["port", "backend", "typo", "localhost"],
)
def test_broken_tempo_config_is_rejected(tempo, mutation):
    broken = copy.deepcopy(tempo)
    mutation(broken)
    assert check_tempo_config(broken) != []


def test_the_dockerfile_builds_the_server_from_this_repository() -> None:
    assert dockerfile_errors(CONFIG_DIR.parent / "Dockerfile") == []


BROKEN_DOCKERFILE = {
    "from a package index": ("python -m build --wheel --outdir /dist .", "true"),
    "editable install": ('"${WHEEL}[server,postgres]"', "-e /src[server]"),
    "runs as root": ("USER tracely", "USER root"),
    "not the tracely command": ('ENTRYPOINT ["tracely"]', 'ENTRYPOINT ["python"]'),
}


@pytest.mark.parametrize("change", BROKEN_DOCKERFILE.values(), ids=BROKEN_DOCKERFILE.keys())
def test_a_broken_dockerfile_is_rejected(tmp_path: Path, change: tuple[str, str]) -> None:
    text = (CONFIG_DIR.parent / "Dockerfile").read_text(encoding="utf-8")
    assert change[0] in text
    (tmp_path / "Dockerfile").write_text(text.replace(change[0], change[1]), encoding="utf-8")
    assert dockerfile_errors(tmp_path / "Dockerfile")
