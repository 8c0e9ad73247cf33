#!/usr/bin/env bash
# The official nmem CLI (nmem-cli 0.10.109) against two real daemons: library (sources: markdown, CSV, a URL, PDF, DOCX), export, import with
# each mode (polling the job to `completed`), the /fs commands, and `feed resolve` on real timeline review events. Every command must exit 0 and print the
# expected data.
#
# Usage: tools/nmem_check.sh ENGRAM_BINARY NMEM_BINARY
# With ENGRAM_CHECK_ENCRYPTED=1 both daemons run on stores encrypted at rest (a key file each; docs/security.md),
# and the check ends by searching their store files and index snapshots for the text it wrote.
# With ENGRAM_CHECK_SYNCED=1 each daemon runs on a store in a sync group of its own (`engram serve --sync`, a folder
# beside the store; docs/sync.md), so every write is also logged and written to the folder as sealed segments.
set -euo pipefail
engram=$1
nmem=$2
work=$(mktemp -d)
# The daemons save their index snapshot and compact their file when they stop, so the directory is removed only after they exited.
cleanup() {
  local pids
  pids=$(jobs -p)
  if [ -n "$pids" ]; then
    kill $pids 2>/dev/null || true
    wait $pids 2>/dev/null || true
  fi
  rm -rf "$work" || true
}
trap cleanup EXIT

start() { # dir port
  local key=()
  if [ "${ENGRAM_CHECK_ENCRYPTED:-}" = 1 ]; then
    [ -f "$1.key" ] || "$engram" keygen "$1.key" > /dev/null
    key=(--key-file "$1.key")
  fi
  local sync=()
  if [ "${ENGRAM_CHECK_SYNCED:-}" = 1 ]; then
    [ -d "$1.sync" ] || "$engram" sync init --folder "$1.sync" --data-dir "$1" "${key[@]}" > /dev/null
    sync=(--sync)
  fi
  "$engram" serve --addr "127.0.0.1:$2" --data-dir "$1" --api-key check-key --embedding-model builtin \
    --allow-url-host 127.0.0.1 "${key[@]}" "${sync[@]}" > "$1.log" 2>&1 &
  for _ in $(seq 1 100); do curl -sf "127.0.0.1:$2/livez" > /dev/null && return 0; sleep 0.2; done
  echo "daemon on $2 did not start"; cat "$1.log"; exit 1
}
expect() { # what pattern output
  if ! grep -q -- "$2" <<< "$3"; then echo "FAIL $1: expected '$2' in:"; echo "$3"; exit 1; fi
  echo "ok   $1"
}

mkdir -p "$work/a" "$work/b"
start "$work/a" 14391
start "$work/b" 14392
export NMEM_API_KEY=check-key
export NMEM_API_URL=http://127.0.0.1:14391
cat > "$work/guide.md" <<'EOF'
# Espresso guide

We decided to buy a new espresso machine for the office in March.

## Cleaning

Backflush the machine every Friday with detergent and descale it every two months.
EOF

out=$("$nmem" library add "$work/guide.md" -l coffee); expect "library add" "guide.md" "$out"
out=$("$nmem" library list); expect "library list" "indexed" "$out"
id=$("$nmem" --json library list | python3 -c 'import json,sys; print(json.load(sys.stdin)["sources"][0]["id"])')
out=$("$nmem" library show "$id"); expect "library show" "Chunks" "$out"
out=$("$nmem" library search descale); expect "library search" "$id" "$out"
out=$("$nmem" library read "$id" --limit 40); expect "library read" "Espresso guide" "$out"
printf 'city,country,population,founded\nOslo,Norway,709000,1040-01-01\nBergen,Norway,291000,1070-01-01\nLund,Sweden,94000,0990-01-01\n' \
  > "$work/cities.csv"
out=$("$nmem" library add "$work/cities.csv" -l data); expect "library add (CSV)" "cities.csv" "$out"
cid=$("$nmem" --json library list | python3 -c 'import json,sys; print(json.load(sys.stdin)["sources"][0]["id"])')
out=$("$nmem" library show "$cid"); expect "library show (CSV)" "text/csv" "$out"
out=$("$nmem" library search Bergen); expect "library search (CSV value)" "$cid" "$out"
out=$("$nmem" library read "$cid"); expect "library read (CSV row)" "city: Bergen | country: Norway | population: 291000" "$out"
out=$(curl -sf -H "Authorization: Bearer check-key" "$NMEM_API_URL/sources/$cid/analysis?columns=population")
expect "CSV analysis" '"mean":364666.6666666667' "$out"
# A web page by URL, from a local origin server (allowed with --allow-url-host 127.0.0.1).
mkdir -p "$work/www"
printf '<html><head><title>Pier notes</title></head><body><h1>Pier</h1><p>The concrete pier replaces the wooden one before the autumn storms.</p></body></html>' \
  > "$work/www/pier.html"
(cd "$work/www" && exec python3 -m http.server 14393 --bind 127.0.0.1 > /dev/null 2>&1) &
for _ in $(seq 1 50); do curl -sf 127.0.0.1:14393/pier.html > /dev/null && break; sleep 0.2; done
out=$("$nmem" library add http://127.0.0.1:14393/pier.html); expect "library add (URL)" "pier.html" "$out"
uid=$("$nmem" --json library list | python3 -c 'import json,sys; print(json.load(sys.stdin)["sources"][0]["id"])')
out=$("$nmem" library show "$uid"); expect "library show (URL)" "url" "$out"
out=$("$nmem" library search "autumn storms"); expect "library search (URL)" "$uid" "$out"
out=$("$nmem" library read "$uid"); expect "library read (URL)" "concrete pier replaces" "$out"
# A PDF (two pages, written here by hand: objects, a cross-reference table with byte offsets) and a DOCX.
python3 - "$work/tides.pdf" "$work/harbour.docx" <<'PY'
import sys, zipfile
pages = ["Tide tables for the outer harbour", "The lighthouse keeper logs the spring tides every morning at six."]
objs = ["<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [%s] /Count %d >>" % (" ".join("%d 0 R" % (4 + 2 * i) for i in range(len(pages))), len(pages)),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
for i, text in enumerate(pages):
    stream = "BT /F1 12 Tf 72 720 Td (%s) Tj ET" % text
    objs.append("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i))
    objs.append("<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
objs.append("<< /Title (Tide tables) >>")
out, offsets = b"%PDF-1.4\n", []
for n, o in enumerate(objs, 1):
    offsets.append(len(out))
    out += b"%d 0 obj\n%s\nendobj\n" % (n, o.encode())
xref = len(out)
out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
out += b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, len(objs), xref)
open(sys.argv[1], "wb").write(out)
w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
def para(text, style=None):
    ppr = '<w:pPr><w:pStyle w:val="%s"/></w:pPr>' % style if style else ""
    return "<w:p>%s<w:r><w:t>%s</w:t></w:r></w:p>" % (ppr, text)
body = para("Harbour works", "Heading1") + para("The breakwater is raised by two metres before the winter gales.")
with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
    z.writestr("word/document.xml", '<?xml version="1.0"?><w:document xmlns:w="%s"><w:body>%s</w:body></w:document>' % (w, body))
PY
out=$("$nmem" library add "$work/tides.pdf"); expect "library add (PDF)" "tides.pdf" "$out"
pid=$("$nmem" --json library list | python3 -c 'import json,sys; print(json.load(sys.stdin)["sources"][0]["id"])')
out=$("$nmem" library show "$pid"); expect "library show (PDF)" "application/pdf" "$out"
expect "library show (PDF text)" "Tide tables for the outer harbour" "$out"
out=$("$nmem" library search "lighthouse keeper"); expect "library search (PDF)" "$pid" "$out"
out=$("$nmem" library read "$pid"); expect "library read (PDF)" "lighthouse keeper logs the spring tides" "$out"
expect "library read (PDF pages)" "# Page 2" "$out"
out=$("$nmem" library add "$work/harbour.docx"); expect "library add (DOCX)" "harbour.docx" "$out"
did=$("$nmem" --json library list | python3 -c 'import json,sys; print(json.load(sys.stdin)["sources"][0]["id"])')
out=$("$nmem" library show "$did"); expect "library show (DOCX)" "wordprocessingml" "$out"
out=$("$nmem" library search breakwater); expect "library search (DOCX)" "$did" "$out"
out=$("$nmem" library read "$did"); expect "library read (DOCX)" "raised by two metres" "$out"
expect "library read (DOCX heading)" "# Harbour works" "$out"
"$nmem" m add "Remember to water the tomatoes on Sunday" --id tomato -l garden > /dev/null

out=$("$nmem" fs ls /); expect "fs ls /" "memories/" "$out"
out=$("$nmem" fs ls /memories/by-label); expect "fs ls by-label" "garden/" "$out"
out=$("$nmem" fs cat /memories/by-id/tomato.memory.md); expect "fs cat" "water the tomatoes" "$out"
out=$("$nmem" fs grep FRIDAY); expect "fs grep (case-insensitive)" "#c1.memory.md:3:" "$out"
out=$("$nmem" fs grep -E "desc[a-z]+e"); expect "fs grep -E" "descale" "$out"
out=$("$nmem" fs recall "watering the garden"); expect "fs recall" "/memories/by-id/tomato.memory.md" "$out"

out=$("$nmem" export "$work/a/backup.zip"); expect "export" "backup.zip" "$out"

# Import into the second store with each mode; the job is polled to `completed` by the CLI.
export NMEM_API_URL=http://127.0.0.1:14392
cp "$work/a/backup.zip" "$work/b/backup.zip"
"$nmem" m add "Remember to water the tomatoes on Sunday" --id tomato -l other > /dev/null
out=$("$nmem" import "$work/b/backup.zip" --mode skip); expect "import --mode skip" "Imported" "$out"
out=$("$nmem" --json m show tomato); expect "skip kept the stored labels" '"other"' "$out"
out=$("$nmem" import "$work/b/backup.zip" --mode merge); expect "import --mode merge" "Imported" "$out"
out=$("$nmem" --json m show tomato); expect "merge united the labels" '"garden"' "$out"
expect "merge kept the stored label" '"other"' "$out"
out=$("$nmem" import "$work/b/backup.zip" --mode overwrite); expect "import --mode overwrite" "Imported" "$out"
out=$("$nmem" --json m show tomato)
if grep -q '"other"' <<< "$out"; then echo "FAIL overwrite kept the stored label"; echo "$out"; exit 1; fi
echo "ok   overwrite replaced the labels"
out=$("$nmem" library list); expect "imported source" "guide.md" "$out"
out=$("$nmem" fs grep descale); expect "imported source searchable" "descale" "$out"

# Timeline reviews: `nmem feed resolve` checks the guarded-review answer strictly (protocol_version, result.preview
# with both memories as full records, result.resolution). Each step is checked in the store over REST.
api() { curl -sf -H "Authorization: Bearer check-key" "$NMEM_API_URL$1"; }
field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
"$nmem" m add "Caroline has 2 kids and lives in Boston" --id kids-old -l family > /dev/null
"$nmem" m add "Caroline has 3 kids and lives in Boston" --id kids-new > /dev/null
"$nmem" m add "Jon moved to Berlin in 2021 for work" --id jon-old > /dev/null
"$nmem" m add "Jon moved to Berlin in 2023 for work" --id jon-new > /dev/null
event_of() { "$nmem" --json feed reviews | field "[e['id'] for e in d['events'] if e['memory_ids'] == ['$1', '$2']][0]"; }
kev=$(event_of kids-old kids-new)
jev=$(event_of jon-old jon-new)
out=$("$nmem" --json feed resolve "$kev" --action keep-newer-as-latest)
expect "feed resolve preview" "kids-old kids-new True kids-new kids-old supersedes label_family:family" \
  "$(field "' '.join(str(x) for x in [m['id'] for m in d['result']['preview']['memories']] + [d['result']['preview']['can_apply'], d['result']['preview']['from_memory_id'], d['result']['preview']['to_memory_id'], d['result']['preview']['relation']] + [l['id'] + ':' + l['name'] for l in d['result']['preview']['memories'][0]['labels']])" <<< "$out")"
plan=$(field "d['result']['preview']['plan_id']" <<< "$out")
expect "preview changed nothing" "active True" "$(api /memories/kids-old | field "d['state'], d['is_latest']" | tr -d "(),'")"
out=$("$nmem" feed resolve "$kev" --action keep-newer-as-latest --plan-id "$plan"); expect "feed resolve apply" "Recorded review decision" "$out"
expect "apply superseded the older memory" "superseded False kids-new" \
  "$(api /memories/kids-old | field "d['state'], d['is_latest'], d['metadata']['superseded_by']" | tr -d "(),'")"
expect "apply kept the newer one" "active True" "$(api /memories/kids-new | field "d['state'], d['is_latest']" | tr -d "(),'")"
out=$("$nmem" feed resolve "$jev" --action dismiss --note "both are true at their time"); expect "feed resolve dismiss" "Recorded review decision" "$out"
expect "dismiss changed no memory" "active active" \
  "$(echo "$(api /memories/jon-old | field "d['state']") $(api /memories/jon-new | field "d['state']")")"
expect "dismiss resolved the event" "dismiss both are true at their time" \
  "$(api "/agent/feed/events?unresolved_only=false" | field "[(e['resolution']['action'], e['resolution']['note']) for e in d['events'] if e['id'] == '$jev'][0]" | tr -d "(),'")"
out=$("$nmem" --json feed resolve "$kev" --action keep-newer-as-latest)
expect "preview of a resolved event" "True False keep_newer_as_latest: memory kids-old becomes superseded by kids-new" \
  "$(field "d['result']['already_resolved'], 'preview' in d['result'], d['result']['resolution']" <<< "$out" | tr -d "(),'")"
expect "still superseded" "superseded" "$(api /memories/kids-old | field "d['state']")"
"$nmem" m add "The office moved to Oslo in 2019" --id office-old > /dev/null
"$nmem" m add "The office moved to Oslo in 2024" --id office-new > /dev/null
oev=$(event_of office-old office-new)
"$nmem" m delete office-old -f > /dev/null
if out=$("$nmem" feed resolve "$oev" --action keep-newer-as-latest 2>&1); then
  echo "FAIL a preview with a deleted memory succeeded:"; echo "$out"; exit 1
fi
expect "preview with a deleted memory is refused" "memory_not_found" "$out"
if [ "${ENGRAM_CHECK_ENCRYPTED:-}" = 1 ]; then
  # Stopped (the close writes the index snapshot), then the stores hold none of the text the check wrote. The
  # plain backup.zip nmem exported is the client's own file (an export without `encrypt` is plain by contract).
  kill $(jobs -p) 2> /dev/null || true
  wait $(jobs -p) 2> /dev/null || true
  for f in "$work"/a/engram.redb "$work"/b/engram.redb "$work"/a/indexes.snapshot "$work"/b/indexes.snapshot; do
    if [ -f "$f" ] && grep -qa -e "Backflush" -e "espresso" -e "Oslo" "$f"; then
      echo "FAIL $f holds plaintext"; exit 1
    fi
  done
  echo "ok   both stores encrypted at rest: no plaintext in their files"
fi
if [ "${ENGRAM_CHECK_SYNCED:-}" = 1 ]; then
  kill $(jobs -p) 2> /dev/null || true
  wait $(jobs -p) 2> /dev/null || true
  # Each daemon's worker wrote what the check wrote to its folder, sealed: segments there, and no plaintext.
  for side in a b; do
    n=$(find "$work/$side.sync" -name '*.seg' -o -name '*.snap' | wc -l)
    [ "$n" -gt 0 ] || { echo "FAIL $side's sync folder holds no segment"; exit 1; }
    if grep -rqa -e "Backflush" -e "espresso" -e "Oslo" "$work/$side.sync"; then
      echo "FAIL $side's sync folder holds plaintext"; exit 1
    fi
  done
  echo "ok   both stores in sync groups: their folders hold sealed segments, no plaintext"
fi
echo "nmem check passed"
