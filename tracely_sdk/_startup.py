"""Recording with no code change: the startup hook, and the recorder attached on first use.

Three things start tracely in a process that never calls :func:`tracely.init`:

- ``tracely_autoinstrument.pth``, installed into site-packages with the package, calls
  :func:`start` at interpreter startup when ``TRACELY_INSTRUMENT`` is set. When it is not,
  the file's one line reads an environment variable and nothing else is imported.
- ``tracely run -- CMD`` runs ``CMD`` with ``TRACELY_INSTRUMENT=auto`` unless it is set.
- tracely's ``opentelemetry_instrumentor`` entry points (``opentelemetry-instrument``) call
  :func:`request` whichever configurator ``OTEL_PYTHON_CONFIGURATOR`` chose.

The recorder (the FixtureSpanProcessor and the store writer, on the application's
TracerProvider, or on one built from the ``OTEL_*`` variables when there is none) is attached
when the first tracely span starts, not at startup: by then the application, or
``opentelemetry-instrument``'s configurator, has set the provider it wants, whichever loaded
first, and tracely adds its recorder to that provider instead of racing to set its own.
"""

from __future__ import annotations

import logging
import threading

from tracely_sdk._seam import before_next_span

logger = logging.getLogger("tracely")

PTH_FILE = "tracely_autoinstrument.pth"

_lock = threading.Lock()


def start() -> None:
    """The startup hook: patch the SDKs ``TRACELY_INSTRUMENT`` names, record from the first span.

    Never raises: a bad setting is logged and the application starts untraced.
    """
    try:
        from tracely_sdk._config import resolve
        from tracely_sdk.providers import instrument

        names = resolve("instrument")
        if names:
            instrument(names)
        request()
    except Exception as exc:
        logger.warning("tracely: TRACELY_INSTRUMENT was not applied: %s", exc)


def request() -> None:
    """Attach the recorder when the next tracely span starts (once; idempotent)."""
    before_next_span.hook = attach


def cancel() -> None:
    """Forget a :func:`request` that no span has acted on yet."""
    before_next_span.hook = None


def requested() -> bool:
    """Whether the recorder is still to be attached by the next span."""
    return before_next_span.hook is not None


def attach() -> None:
    """Attach the recorder if it was requested, as ``tracely.init()`` would; never raises."""
    with _lock:
        if before_next_span.hook is None:
            return
        before_next_span.hook = None
    try:
        from tracely_sdk._init import init

        init()
    except Exception as exc:
        logger.warning("tracely: the recorder could not be attached: %s", exc)
