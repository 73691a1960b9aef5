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
    print(looked.count("openai"), "httpx2.Client.send" in rep.providers)
    import openai  # the application imports the SDK after the blocks: it is patched then

    print("httpx2.Client.send" in providers.patched_methods())
    """
)


def test_an_sdk_not_yet_imported_is_looked_for_once_and_patched_on_import() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "False", "True"]


RUN_SCRIPT = textwrap.dedent(
    """
    import httpx2
    import openai

    import tracely_sdk as tracely
    from tracely_sdk._replay import RunSettings, replay_session
    from tracely_sdk.providers import _patching

    reads = []
    refresh = _patching.refresh_settings

    def counting():
        reads.append(1)
        refresh()

    _patching.refresh_settings = counting
    CREATE = "httpx2.Client.send"  # beneath the OpenAI SDK
    run = RunSettings.resolve()

    def block(settings):
        with replay_session({}, settings=settings) as session:
            return CREATE in session.report.providers

    # The cases of one run: activated by the first, the others find nothing changed.
    print(len(reads), [block(run) for _ in range(3)], len(reads))
    # A naive unwrap between two cases puts the client's own method back: the next case patches.
    httpx2.Client.send = httpx2.Client.send.__wrapped__
    print(block(run), len(reads), CREATE in tracely.providers.patched_methods())
    # The first case of another run reads the settings again; so does every fixtures() block.
    print(block(RunSettings.resolve()), len(reads))
    with tracely.fixtures({}):
        pass
    print(len(reads))
    """
)


def test_the_cases_of_a_run_activate_the_provider_patches_once_until_something_changes() -> None:
    done = subprocess.run(
        [sys.executable, "-c", RUN_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "0 [True, True, True] 1",
        "True 2 True",
        "True 3",
        "4",
    ]
