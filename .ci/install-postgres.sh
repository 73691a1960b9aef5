#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: installs Debian's postgresql if it is missing,
# initialises a cluster in a temporary directory, starts it on 127.0.0.1 on a free port, creates
# a database and a user, and prints the one line a caller evaluates:
#
#     eval "$(.ci/install-postgres.sh)"      # sets TRACELY_TEST_POSTGRES_URL
#
# Idempotent: an installed PostgreSQL is not reinstalled, a running cluster is reused (same URL).
# Everything but the export line goes to stderr.
#
#     .ci/install-postgres.sh stop           # stop the cluster (the directory is kept)
#     .ci/install-postgres.sh destroy        # stop it and remove its directory
#
# Environment:
#     TRACELY_PG_DIR         where the cluster lives (default: $TMPDIR/tracely-pg-<uid>)
#     TRACELY_PG_NO_INSTALL  set to 1 to fail instead of running apt-get when it is missing
#     TRACELY_PG_WAIT        seconds to wait for the server to accept connections (default 60)
set -euo pipefail

log() { printf 'install-postgres: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

STATE="${TRACELY_PG_DIR:-${TMPDIR:-/tmp}/tracely-pg-$(id -u)}"
DB=tracely
USER_NAME=tracely
WAIT="${TRACELY_PG_WAIT:-60}"

find_bindir() {
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [ -n "$dir" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ]; then
        printf '%s\n' "$dir"
        return 0
    fi
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v pg_ctl)"
        return 0
    fi
    return 1
}

install_postgres() {
    if [ "${TRACELY_PG_NO_INSTALL:-0}" = 1 ]; then
        die "PostgreSQL is not installed (and TRACELY_PG_NO_INSTALL=1): apt-get install postgresql"
    fi
    if [ "$(id -u)" != 0 ]; then
        die "PostgreSQL is not installed and installing it needs root: sudo apt-get install postgresql"
    fi
    log "installing Debian's postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
}

BINDIR="$(find_bindir || true)"
if [ -z "$BINDIR" ]; then
    install_postgres
    BINDIR="$(find_bindir)" || die "postgresql was installed but pg_ctl/initdb cannot be found"
fi

# initdb and the server refuse to run as root: as root, everything runs as the postgres user.
if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || die "running as root, but there is no postgres user to run the server as"
    as_owner() {
        if command -v runuser >/dev/null 2>&1; then
            runuser -u postgres -- "$@"
        else
            su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
        fi
    }
    OWNER=postgres
else
    as_owner() { "$@"; }
    OWNER="$(id -un)"
fi

pg() { as_owner "$BINDIR/$1" "${@:2}"; }

# The server runs as $OWNER, who must reach its data directory. A state directory inside a
# private (0700) temporary directory of root's is out of its reach, so the cluster then lives in
# a directory of its own, and $STATE/cluster names it for the next start, stop or destroy.
CLUSTER="$(cat "$STATE/cluster" 2>/dev/null || printf '%s' "$STATE")"
DATA="$CLUSTER/data"
SOCK="$CLUSTER/sock"
LOGFILE="$CLUSTER/server.log"

running() { [ -f "$DATA/postmaster.pid" ] && pg pg_ctl -D "$DATA" status >/dev/null 2>&1; }

case "${1:-start}" in
    stop)
        if running; then pg pg_ctl -D "$DATA" -m fast -w stop >&2; fi
        exit 0
        ;;
    destroy)
        if running; then pg pg_ctl -D "$DATA" -m fast -w stop >&2; fi
        rm -rf "$CLUSTER" "$STATE"
        exit 0
        ;;
    start) ;;
    *) die "unknown command ${1}; expected start, stop or destroy" ;;
esac

# A free TCP port on 127.0.0.1: the one asked for ($1) if it is free, else any.
free_port() {
    local code='
import socket, sys
want = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] else 0
for port in ([want] if want else []) + [0]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    print(s.getsockname()[1])
    break
'
    python3 -c "$code" "${1:-}" 2>/dev/null || python -c "$code" "${1:-}"
}

mkdir -p "$STATE"
chmod 755 "$STATE"
if [ "$CLUSTER" = "$STATE" ] && ! as_owner test -x "$STATE" 2>/dev/null; then
    CLUSTER="$(mktemp -d "/tmp/tracely-pg-cluster.XXXXXX")"
    chmod 755 "$CLUSTER"
    printf '%s\n' "$CLUSTER" >"$STATE/cluster"
    DATA="$CLUSTER/data"
    SOCK="$CLUSTER/sock"
    LOGFILE="$CLUSTER/server.log"
    log "$STATE is out of the $OWNER user's reach; the cluster lives in $CLUSTER"
fi
if [ ! -f "$DATA/PG_VERSION" ]; then
    log "initialising a cluster in $DATA"
    rm -rf "$DATA" "$SOCK"
    mkdir -p "$DATA" "$SOCK"
    chown "$OWNER" "$DATA" "$SOCK"
    chmod 700 "$DATA"
    # A password for the test user; kept beside the cluster so a rerun prints the same URL.
    (umask 077 && head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$STATE/password")
    pg initdb -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 >"$STATE/initdb.log" 2>&1 \
        || { cat "$STATE/initdb.log" >&2; die "initdb failed"; }
    rm -f "$STATE/port" "$STATE/created"
fi
[ -f "$STATE/password" ] || die "$STATE/password is missing; remove $STATE and run again"
PASSWORD="$(cat "$STATE/password")"

if running; then
    PORT="$(cat "$STATE/port")"
    log "reusing the server already running on 127.0.0.1:$PORT"
else
    PORT="$(free_port "$(cat "$STATE/port" 2>/dev/null || true)")"
    [ -n "$PORT" ] || die "cannot find a free TCP port (python3 is needed to pick one)"
    mkdir -p "$SOCK" && chown "$OWNER" "$SOCK"
    log "starting PostgreSQL on 127.0.0.1:$PORT"
    touch "$LOGFILE" && chown "$OWNER" "$LOGFILE"
    if ! pg pg_ctl -D "$DATA" -l "$LOGFILE" -w -t "$WAIT" \
        -o "-c listen_addresses=127.0.0.1 -p $PORT -k $SOCK -c max_connections=200" start >&2; then
        tail -n 30 "$LOGFILE" >&2 || true
        die "the server did not start; its log is $LOGFILE"
    fi
    echo "$PORT" >"$STATE/port"
fi

psql_admin() { pg psql -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres -d postgres "$@"; }

deadline=$((SECONDS + WAIT))
until pg pg_isready -q -h "$SOCK" -p "$PORT" -U postgres; do
    [ "$SECONDS" -lt "$deadline" ] || die "the server on port $PORT does not accept connections; see $LOGFILE"
    sleep 0.2
done

if [ ! -f "$STATE/created" ]; then
    if [ -z "$(psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$USER_NAME'")" ]; then
        psql_admin -c "CREATE ROLE $USER_NAME LOGIN CREATEDB PASSWORD '$PASSWORD'"
    else
        psql_admin -c "ALTER ROLE $USER_NAME LOGIN CREATEDB PASSWORD '$PASSWORD'"
    fi
    if [ -z "$(psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'")" ]; then
        psql_admin -c "CREATE DATABASE $DB OWNER $USER_NAME"
    fi
    touch "$STATE/created"
fi

echo "export TRACELY_TEST_POSTGRES_URL=postgresql://$USER_NAME:$PASSWORD@127.0.0.1:$PORT/$DB"
