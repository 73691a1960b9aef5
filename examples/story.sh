#!/usr/bin/env bash
# The main job of tracely, as the commands a user types: a production trace of a silent
# failure becomes a regression case, the fix is gated on it, and the regression is caught.
#
#   record run_broken live -> promote -> replay run (INCOMPLETE) -> record run live ->
#   recapture (version 2) -> replay run (PASS) -> replay run_broken (FAIL on the missing tool)
#
# Runs in a fresh temporary store and working directory; leaves nothing behind.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
export TRACELY_STORE="sqlite:///$tmp/tracely.db"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
# The reference agent lives outside this temporary project: allow it by name, as a project's
# pyproject.toml would ([tool.tracely] entrypoints). A case cannot choose other code to run.
export TRACELY_ENTRYPOINTS="examples.weather_agent:*"

# The `tracely` console script when tracely is installed, else the same CLI from the checkout.
tracely() {
    if command -v tracely >/dev/null 2>&1; then
        command tracely "$@"
    else
        "$PYTHON" -m tracely_sdk.cli "$@"
    fi
}

step() { printf '\n==> %s\n' "$*"; }

# Runs a command that must exit with status $1 (a failing gate is part of the story).
expect_exit() {
    local want=$1 got=0
    shift
    "$@" || got=$?
    if [ "$got" -ne "$want" ]; then
        echo "story.sh: expected exit status $want from '$*', got $got" >&2
        exit 1
    fi
}

latest_trace() {
    tracely traces list --limit 1 --json |
        "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["traces"][0]["trace_id"])'
}

step "1. Production: the agent silently skips the weather tool (run_broken), recorded live"
"$PYTHON" -m examples.weather_agent --fn run_broken Paris
broken="$(latest_trace)"
tracely traces show "$broken"

step "2. Promote that trace to a regression case of the fixed agent (examples.weather_agent:run)"
tracely cases promote "$broken" --name "Paris weather" --entrypoint examples.weather_agent:run

step "3. Replay the fix against the recording of the bug: INCOMPLETE, never a live call (exit 1)"
expect_exit 1 tracely replay

step "4. The fix runs for real (CI, staging, production), recorded live"
"$PYTHON" -m examples.weather_agent --fn run Paris
fixed="$(latest_trace)"

step "5. Recapture the case from the faithful run: version 2, version 1 kept in its history"
tracely cases recapture paris-weather "$fixed"
tracely cases history paris-weather

step "6. Replay the fix hermetically: PASS (exit 0)"
tracely replay

step "7. Replay the regression (run_broken): FAIL on the missing tool (exit 1)"
expect_exit 1 tracely replay --entrypoint examples.weather_agent:run_broken

step "Done: record -> promote -> replay -> recapture -> replay"
