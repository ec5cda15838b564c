#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and CI: `start DIR PORT [DB]` / `stop DIR`.
#
# initdb in DIR (as the postgres user when run as root: the server refuses to run as root), listening on
# 127.0.0.1:PORT only, trust authentication on loopback, lc_messages=C (DuckLake recognises the errors it
# retries by PostgreSQL's English text), and a database DB (default tracegrade). Prints the libpq DSN.
set -euo pipefail

usage() { echo "usage: $0 start DIR PORT [DB] | stop DIR" >&2; exit 2; }

bin_dir() {
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v pg_ctl)")"; return; fi
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$found" ] || { echo "pg_ctl not found: install PostgreSQL (apt-get install postgresql)" >&2; exit 1; }
  echo "$found"
}

as_owner() {  # run a PostgreSQL binary as the cluster's owner
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

[ $# -ge 2 ] || usage
cmd=$1 dir=$2
bin=$(bin_dir)
case "$cmd" in
  start)
    [ $# -ge 3 ] || usage
    port=$3 db=${4:-tracegrade}
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
      chown postgres: "$dir"
      runuser -u postgres -- test -w "$dir" \
        || { echo "the postgres user cannot reach $dir: give its parent directories o+x" >&2; exit 1; }
    fi
    chmod 700 "$dir"
    if [ ! -f "$dir/PG_VERSION" ]; then
      out=$(as_owner "$bin/initdb" -D "$dir" -U postgres -A trust -E UTF8 --locale=C --no-sync 2>&1) \
        || { echo "$out" >&2; exit 1; }
      cat >>"$dir/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
lc_messages = 'C'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
CONF
      printf 'local all all trust\nhost all all 127.0.0.1/32 trust\n' >"$dir/pg_hba.conf"
    fi
    as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qtAc \
      "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 \
      || as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres "$db"
    echo "host=127.0.0.1 port=$port user=postgres dbname=$db"
    ;;
  stop)
    [ -f "$dir/postmaster.pid" ] || exit 0
    as_owner "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null
    ;;
  *) usage ;;
esac
