#!/usr/bin/env bash
# Counts the PostgreSQL statements that 20 `POST /memories` (two labels each) cause, with everything the writes
# set off in the 5 s after them (background work, change-feed polling), on a throwaway cluster made by
# `tools/postgres/cluster.sh start DIR`. The server logs every statement (`log_statement = all`, set and reset
# with ALTER SYSTEM) while the writes run; the count is the log lines of that window.
#
# usage: tools/postgres/count-write-statements.sh ENGRAM_BIN CLUSTER_DIR [TAG]
#   ENGRAM_BIN: an `engram` built with the `server` and `postgres` features; CLUSTER_DIR: the cluster's DIR.
set -euo pipefail
bin=$1
dir=$2
tag=${3:-count}
pg="host=$dir user=engram dbname=postgres"
schema="cnt_$tag"
psql "$pg" -q -c "DROP SCHEMA IF EXISTS $schema CASCADE" -c "CREATE SCHEMA $schema" > /dev/null 2>&1
url="host=$dir user=engram dbname=postgres options='-csearch_path=$schema'"
data=$(mktemp -d)
port=$((15000 + RANDOM % 1000))
ENGRAM_LOG=warn "$bin" serve --addr "127.0.0.1:$port" --data-dir "$data" --api-key k --database-url "$url" \
  --embedding-model builtin > /dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data" || true' EXIT
for _ in $(seq 1 100); do curl -sf "127.0.0.1:$port/livez" > /dev/null && break; sleep 0.2; done
post() { curl -sf -H "X-NMEM-API-Key: k" -H 'content-type: application/json' -d "$1" "127.0.0.1:$port/memories" > /dev/null; }
post '{"content":"warm up","labels":["a","b"]}'
sleep 5   # the warm-up's background work settles first
psql "$pg" -q -c "ALTER SYSTEM SET log_statement = 'all'" -c "SELECT pg_reload_conf()" > /dev/null
sleep 0.5
start=$(wc -l < "$dir/server.log")
for i in $(seq 1 20); do
  post "{\"content\":\"Note $i: the train to Porto leaves at $i o'clock\",\"labels\":[\"travel\",\"trip$((i % 3))\"]}"
done
sleep 5
psql "$pg" -q -c "ALTER SYSTEM RESET log_statement" -c "SELECT pg_reload_conf()" > /dev/null
total=$(tail -n +"$((start + 1))" "$dir/server.log" | grep -cE "LOG:  (statement|execute)" || true)
echo "$tag: $total statements for 20 writes and the 5 s after them (about $((total / 20)) per write)"
