#!/usr/bin/env bash
# Real MCP clients against the daemon (issue 15's acceptance list). Installs each client into its own venv (or
# node_modules) under target/mcp-clients, starts `engram serve` on a temporary store, and runs:
#   the Python mcp SDK 1.x (ClientSession; tools/list then 100 calls), the SDK 2.x Client in modes legacy and
#   auto, nowledge-mem-langgraph 0.1.1 (external-agent set), the FastMCP 2.12 client on localhost/mcp, MCP
#   Inspector 2.12 --cli (tools/list --strict, add, search), nmem-cli 0.9.29 `m delete a b -f` (MCP bulk
#   delete), and the nmem-cli 0.10.109 commands that use /agent/feed/events, /agent/trigger/memory-catchup and
#   /agent/tools/call.
# Usage: tools/mcp_clients_check.sh ENGRAM_BINARY [PORT]
set -euo pipefail
engram=$1
port=${2:-14298}
root=target/mcp-clients
mkdir -p "$root"

venv() { # name, pip arguments...
  local name=$1
  shift
  if [ ! -x "$root/$name/bin/python" ]; then
    # A venv left half-made (say, by a full disk) would be taken as installed by the next run.
    python3 -m venv "$root/$name" && "$root/$name/bin/pip" install -q "$@" || {
      rm -rf "${root:?}/$name"
      df -h .
      return 1
    }
  fi
}
echo "-- installing clients"
venv sdk1 "mcp>=1.10,<2" nowledge-mem-langgraph==0.1.1
venv sdk2 mcp==2.3.0
# FastMCP 2.12.5 resolves mcp 1.16, whose server module imports a pydantic internal removed in pydantic 2.12.
venv fastmcp fastmcp==2.12.5 "pydantic<2.12"
venv nmem029 nmem-cli==0.9.29
venv nmem010 nmem-cli==0.10.109
if [ ! -x "$root/inspector/node_modules/.bin/mcp-inspector" ]; then
  mkdir -p "$root/inspector"
  (cd "$root/inspector" && npm install --silent --no-audit --no-fund @modelcontextprotocol/inspector@2.12.0)
fi

data=$(mktemp -d)
# The store is in a sync group of its own, and the daemon runs its sync worker (docs/sync.md): the clients must
# see no difference.
"$engram" sync init --folder "$data.sync" --data-dir "$data" > /dev/null
"$engram" serve --addr "127.0.0.1:$port" --data-dir "$data" --embedding-model builtin --sync > "$root/daemon.log" 2>&1 &
daemon=$!
cleanup() {
  kill "$daemon" 2> /dev/null || true
  wait "$daemon" 2> /dev/null || true
  rm -rf "$data" "$data.sync"
}
trap cleanup EXIT
for _ in $(seq 1 100); do curl -sf "127.0.0.1:$port/livez" > /dev/null && break; sleep 0.2; done
key=$(cat "$data/api-key")
base="http://127.0.0.1:$port"
check=tools/mcp_client_check.py

echo "-- Python mcp SDK 1.x"
"$root/sdk1/bin/python" "$check" sdk1 "$base" "$key"
echo "-- Python mcp SDK 2.x"
"$root/sdk2/bin/python" "$check" sdk2-legacy "$base" "$key"
"$root/sdk2/bin/python" "$check" sdk2-auto "$base" "$key"
echo "-- nowledge-mem-langgraph 0.1.1"
"$root/sdk1/bin/python" "$check" langgraph "$base" "$key"
echo "-- FastMCP 2.12 client"
"$root/fastmcp/bin/python" "$check" fastmcp "$base" "$key" 2> "$root/fastmcp.err" || {
  cat "$root/fastmcp.err"
  exit 1
}

echo "-- MCP Inspector 2.12 --cli"
insp="$root/inspector/node_modules/.bin/mcp-inspector"
url="$base/mcp/"
"$insp" --cli "$url" --transport http --header "X-NMEM-API-Key: $key" --method tools/list --strict \
  > "$root/inspector-strict.txt" 2>&1 || {
  cat "$root/inspector-strict.txt"
  echo "inspector --strict found error-severity issues"
  exit 1
}
grep -E "Schema portability|errors," "$root/inspector-strict.txt" | tail -n 1 || true
"$insp" --cli "$url" --transport http --header "X-NMEM-API-Key: $key" --header "APP: Codex" --method tools/call \
  --tool-name memory_add --tool-arg content="Inspector marker insp-42" > /dev/null
"$insp" --cli "$url" --transport http --header "X-NMEM-API-Key: $key" --method tools/call --tool-name memory_search \
  --tool-arg query=insp-42 > "$root/inspector-search.json"
grep -q "Inspector marker insp-42" "$root/inspector-search.json" || {
  cat "$root/inspector-search.json"
  exit 1
}
echo "OK inspector (tools/list --strict, add, search)"

export NMEM_API_URL=$base NMEM_API_KEY=$key
new_memory() {
  curl -sf -X POST "$base/memories" -H "X-NMEM-API-Key: $key" -H 'Content-Type: application/json' -d "$1" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["memory"]["id"])'
}
echo "-- nmem-cli 0.9.29: m delete a b -f (MCP memory_delete, bulk)"
a=$(new_memory '{"content":"bulk delete one"}')
b=$(new_memory '{"content":"bulk delete two"}')
"$root/nmem029/bin/nmem" --json m delete "$a" "$b" -f > "$root/nmem029-delete.json"
python3 - "$root/nmem029-delete.json" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["summary"]["deleted_count"] == 2 and d["summary"]["failed_count"] == 0, d
print("OK nmem 0.9.29 m delete: deleted_count 2")
PY
test "$(curl -s -o /dev/null -w '%{http_code}' -H "X-NMEM-API-Key: $key" "$base/memories/$a")" = 404

echo "-- nmem-cli 0.10.109: feed reviews (GET /agent/feed/events), feed catchup, library search-chunks (/agent/tools/call)"
n10="$root/nmem010/bin/nmem"
new_memory '{"content":"Caroline has 2 kids and lives in Boston"}' > /dev/null
new_memory '{"content":"Caroline has 3 kids and lives in Boston"}' > /dev/null
"$n10" --json feed reviews > "$root/nmem010-reviews.json"
python3 - "$root/nmem010-reviews.json" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert any("number: 2 -> 3" in " ".join(e["signals"]) for e in d["events"]), d
print("OK nmem 0.10.109 feed reviews:", len(d["events"]), "pending")
PY
"$n10" --json feed catchup --horizon 3 > "$root/nmem010-catchup.json"
grep -q '"threads_scanned"' "$root/nmem010-catchup.json"
echo "OK nmem 0.10.109 feed catchup --horizon 3"
printf '# Runbook\n\n## Restore\n\nTo restore the billing database, stop the writer, copy the last snapshot, then replay the WAL.\n\n## Rotate\n\nRotate the TLS keys every 90 days.\n' > "$root/runbook.md"
sid=$("$n10" --json library add "$root/runbook.md" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
"$n10" --json library search-chunks "$sid" "restore billing snapshot" > "$root/nmem010-chunks.json"
python3 - "$root/nmem010-chunks.json" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["chunks"] and "snapshot" in d["chunks"][0]["text"], d
print("OK nmem 0.10.109 library search-chunks:", d["chunks"][0]["chunk_index"], "of", d["total_chunks"])
PY
echo "-- the MCP tool sync_status, and the worker's segments"
curl -sf -X POST "$base/mcp" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' \
  -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sync_status","arguments":{}}}' > "$root/sync-status.json"
python3 - "$root/sync-status.json" << 'PY'
import json, sys
s = json.load(open(sys.argv[1]))["result"]["structuredContent"]
assert s["enabled"] is True and s["error"] is None and s["peers"] == [], s
PY
sleep 1
n=$(find "$data.sync" -name '*.seg' -o -name '*.snap' | wc -l)
[ "$n" -gt 0 ] || { echo "FAIL the sync worker wrote no segment"; exit 1; }
echo "OK sync_status says enabled; $n sealed file(s) in the folder"
echo "-- all MCP clients passed"
