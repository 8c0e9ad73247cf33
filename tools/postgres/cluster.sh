#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for the `postgres` feature's tests: listens on a unix socket in DIR only (no
# TCP port, so no clash), trusts local connections, skips fsync. `start` prints the connection string to export
# as ENGRAM_TEST_PG; `stop` stops the cluster and deletes DIR. As root (CI), the server runs as the `postgres`
# user that the Debian package creates. Startup is about 1 s (../shared/design/scale-out.md §3.3).
#
# `down` stops the server at once (as a crash would) and keeps DIR; `up` starts it again on the same data: the
# fault tests lose and regain the database with them.
#
# usage: tools/postgres/cluster.sh start|stop|down|up DIR      (PG_BIN overrides /usr/lib/postgresql/15/bin)
set -euo pipefail
bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
cmd=${1:?start or stop}
dir=${2:?directory}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
up() {
  as_pg "$bin/pg_ctl" -D "$1/data" -l "$1/server.log" -w \
    -o "-c listen_addresses= -k $1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start > /dev/null
}
case $cmd in
start)
  [ -x "$bin/initdb" ] || { echo "no PostgreSQL server in $bin (Debian: apt-get install postgresql-15)" >&2; exit 1; }
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
  as_pg "$bin/initdb" -D "$dir/data" -U engram --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync > "$dir/initdb.log"
  up "$dir"
  echo "host=$dir user=engram dbname=postgres"
  ;;
down)
  as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop > /dev/null
  ;;
up)
  up "$dir"
  ;;
stop)
  if [ -d "$dir/data" ]; then as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop > /dev/null 2>&1 || true; fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 start|stop|down|up DIR" >&2
  exit 2
  ;;
esac
