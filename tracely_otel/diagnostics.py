"""Failures inside tracely: logged once in production, raised under tracely's own tests.

Tracing must never break the application it traces, so a failure inside tracely (a result a
codec cannot read, an extraction that fails) is caught and logged, once per kind so that a
hot path cannot flood the log. Caught like that, a bug would also pass every test that does
not read the log. With ``TRACELY_RAISE_INTERNAL_ERRORS=1`` in the environment, which tracely's
test suite sets, a caught exception is raised again where it would have been logged.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

RAISE_INTERNAL_ERRORS = "TRACELY_RAISE_INTERNAL_ERRORS"
"""The variable that makes :class:`WarnOnce` raise the exception it was given instead."""


class WarnOnce:
    """``warn(key, message, *args, exc_info=False)``: log ``message`` the first time ``key`` is
    seen. Called with ``exc_info=True`` inside an ``except`` block, it logs the exception's
    traceback, or raises the exception again when :data:`RAISE_INTERNAL_ERRORS` is ``1``."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, key: str, message: str, *args: Any, exc_info: bool = False) -> None:
        if exc_info and os.environ.get(RAISE_INTERNAL_ERRORS) == "1":
            raise  # the exception the caller is handling
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
        self._logger.warning(message, *args, exc_info=exc_info)

    def forget(self) -> None:
        """Log every kind again the next time it is seen."""
        with self._lock:
            self._seen.clear()


__all__ = ["RAISE_INTERNAL_ERRORS", "WarnOnce"]
