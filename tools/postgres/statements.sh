#!/usr/bin/env bash
# Counts the SQL statements Engram sends to PostgreSQL (issue 36): a daemon built with `server,postgres` over a
# throwaway cluster with `log_statement = all` takes 5 warm-up writes, then 20 `POST /memories` (two labels and
# four named entities each), then ten 10-hit searches; the server log's statement lines are counted per phase
# ("during requests" and "incl. 5 s after", which adds the background work and feed polling the writes cause).
# The server log is left in target/statements-server.log for a breakdown by statement text.
#
# usage: tools/postgres/statements.sh BINARY        (e.g. target/release/engram)
set -euo pipefail
bin=$(realpath "${1:?the engram binary (cargo build --release --features server,postgres)}")
here=$(cd "$(dirname "$0")/../.." && pwd)
pgd=/tmp/engram-statements-$$
dd=$(mktemp -d /tmp/engram-statements-data.XXXXXX)
port=${PORT:-14391}
key=statements-$$
url=$("$here/tools/postgres/cluster.sh" start "$pgd")
cleanup() {
  [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  "$here/tools/postgres/cluster.sh" stop "$pgd"
  rm -rf "$dd"
}
trap cleanup EXIT
psql "$url" -qc "ALTER SYSTEM SET log_statement = 'all'"
psql "$url" -qc "SELECT pg_reload_conf()" > /dev/null
"$bin" serve --addr "127.0.0.1:$port" --data-dir "$dd" --api-key "$key" --database-url "$url" > "$dd/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" > /dev/null && break; sleep 0.2; done
h=(-H "Authorization: Bearer $key" -H 'Content-Type: application/json')
a="http://127.0.0.1:$port"
log="$pgd/server.log"
count() { grep -c 'LOG:  statement:\|LOG:  execute' "$log" || true; }
for i in 1 2 3 4 5; do
  curl -sf "${h[@]}" "$a/memories" -d "{\"content\":\"Warm up $i: Alice in Paris and the garden project\",\"labels\":[\"warm\",\"garden\"]}" > /dev/null
done
sleep 3
n0=$(count)
for i in $(seq 20); do
  curl -sf "${h[@]}" "$a/memories" \
    -d "{\"content\":\"Alice met Bob $i in Paris to talk about the garden project and Carol's roses number $i\",\"labels\":[\"work\",\"garden\"]}" > /dev/null
done
n1=$(count)
sleep 5
n2=$(count)
for _ in $(seq 10); do
  curl -sf "${h[@]}" "$a/memories/search" -d '{"query":"Alice garden roses in Paris","limit":10}' > /dev/null
done
n3=$(count)
per() { awk -v a="$1" -v n="$2" 'BEGIN { printf "%.2f", a / n }'; }
echo "writes: $(per $((n1 - n0)) 20) statements per POST /memories during the requests, $(per $((n2 - n0)) 20) with 5 s after"
echo "search: $(per $((n3 - n2)) 10) statements per 10-hit search"
mkdir -p "$here/target"
cp "$log" "$here/target/statements-server.log"
