#!/usr/bin/env bash
# Installs pgvector 0.8.0 into the machine's PostgreSQL 15, built from Debian's source package (nothing of
# pgvector is kept in this repository), as ../shared/design/scale-out.md §3.2 and §5.5 measured: about a minute
# (the -dev package, then a 23 s build on 2 cores). Idempotent: does nothing when the extension is installed.
# Needs root (apt-get, make install). The apt state for the source download is private (a temp dir), so
# /etc/apt stays untouched; the source tarball is checked against its SHA-256.
set -euo pipefail
pg=${PG_DIR:-/usr/lib/postgresql/15}
if [ -f /usr/share/postgresql/15/extension/vector.control ]; then
  echo "pgvector: installed already"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql-server-dev-15 > /dev/null
s=$(mktemp -d)
trap 'rm -rf "$s"' EXIT
mkdir -p "$s/lists/partial" "$s/cache/archives/partial"
uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
echo "deb-src $uri trixie main" > "$s/sources.list"
A=(-o Dir::Etc::sourcelist="$s/sources.list" -o Dir::Etc::sourceparts=/nonexistent
   -o Dir::State::Lists="$s/lists" -o Dir::Cache="$s/cache")
apt-get "${A[@]}" update -qq
cd "$s"
apt-get "${A[@]}" source --download-only pgvector=0.8.0-1 > /dev/null
echo "867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0  pgvector_0.8.0.orig.tar.gz" | sha256sum -c --quiet
tar xzf pgvector_0.8.0.orig.tar.gz
# with_llvm=no: no JIT bitcode; OPTFLAGS="": a portable build, as Debian's no-native patch.
make -s -C pgvector-0.8.0 PG_CONFIG="$pg/bin/pg_config" with_llvm=no OPTFLAGS="" -j2 install > /dev/null
echo "pgvector: 0.8.0 installed into $pg"
