"""Entering a fixtures() block patches the provider SDKs the application has imported, and
those it has not yet are patched when it imports them: each is looked for on disk once, not
by every block."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import importlib.util
    import sys

    import tracely_sdk as tracely
    from tracely_sdk import providers

    looked = []
    find_spec = importlib.util.find_spec

    def counting(name, *args, **kwargs):
        looked.append(name)
        return find_spec(name, *args, **kwargs)

    importlib.util.find_spec = counting
    assert "openai" not in sys.modules
    for _ in range(3):
        with tracely.fixtures({}) as rep:
            pass
    print(looked.count("openai"), "OpenAI.chat.completions.create" in rep.providers)
    import openai  # the application imports the SDK after the blocks: it is patched then

    print("OpenAI.chat.completions.create" in providers.patched_methods())
    """
)


def test_an_sdk_not_yet_imported_is_looked_for_once_and_patched_on_import() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "False", "True"]
