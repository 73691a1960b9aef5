#!/usr/bin/env bash
# Chromium for the page tests: Debian's chromium package, which Playwright drives through its
# executable_path (Playwright cannot download its own browsers here). Installs it when it is
# missing and this runs as root; prints nothing on success. On failure says why on stderr and
# exits 1, and the page tests are skipped with the reason.
#
#     bash .ci/install-chromium.sh
#
# Environment:
#     TRACELY_CHROMIUM   an executable to use instead (checked, never installed)
set -euo pipefail

log() { printf 'install-chromium: %s\n' "$*" >&2; }

found() {
    if [ -n "${TRACELY_CHROMIUM:-}" ]; then
        [ -x "$TRACELY_CHROMIUM" ]
        return
    fi
    [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1 \
        || command -v chromium-browser >/dev/null 2>&1
}

found && exit 0
if [ -n "${TRACELY_CHROMIUM:-}" ]; then
    log "TRACELY_CHROMIUM=$TRACELY_CHROMIUM is not an executable"
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    log "Chromium is not installed and installing it needs root: sudo apt-get install chromium"
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    log "Chromium is not installed and there is no apt-get to install it with"
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq chromium >&2
found || { log "chromium was installed but cannot be found"; exit 1; }
