"""What the provider patches read from the configuration, and their warnings.

Settings are read when a provider is instrumented and when a ``fixtures()`` block starts,
never per call. A warning is logged once per process for each kind of trouble: a patched call
runs on every request, and the same trouble would otherwise flood the log.
"""

from __future__ import annotations

import logging

from tracely_otel.diagnostics import WarnOnce
from tracely_sdk.errors import ConfigError

logger = logging.getLogger("tracely")

warn_once = WarnOnce(logger)


class _Settings:
    """Read when a provider is instrumented and when a fixtures() block starts, never per call."""

    capture_content = False


settings = _Settings()


def refresh_settings() -> None:
    from tracely_sdk._config import resolve

    try:
        settings.capture_content = bool(resolve("capture_content"))
    except ConfigError as exc:
        warn_once("capture", "tracely: %s; message content is not captured", exc)
        settings.capture_content = False


__all__ = ["refresh_settings", "settings", "warn_once"]
