"""How the examples run live: traced, recorded, and honest about where the recording went."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import tracely_sdk as tracely


@contextmanager
def recorded_run(**init_options: Any) -> Iterator[None]:
    """``tracely.init(**init_options)``, then after the block ``recorded trace ID`` on stderr.

    It says "recorded" only once the recording is in the store; otherwise it says it is not,
    and tracely's own messages above it say what happened to it (kept in the spool and written
    when the store is back, or lost).
    """
    finished: list[str] = []
    tracely.init(on_bundle=lambda trace_id, bundle: finished.append(trace_id), **init_options)
    try:
        yield
    finally:
        stored = tracely.flush()
        for trace_id in finished:
            if stored:
                print(f"recorded trace {trace_id}", file=sys.stderr)
            else:
                print(f"trace {trace_id} is not in the store (see above)", file=sys.stderr)
