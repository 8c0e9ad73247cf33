#!/usr/bin/env bash
# Writes the store fixtures of this release's format into tests/fixtures/stores/NAME (tests/store_fixtures.rs):
# the redb store, then on a throwaway PostgreSQL cluster (cluster.sh) the PostgreSQL store, which the test dumps
# with `pg_dump --inserts` before anything reads it. Needs the machine's postgresql-15 and pgvector
# (pgvector.sh).
#
# usage: tools/postgres/write-store-fixture.sh NAME      (NAME: v<format version>, e.g. v1)
set -euo pipefail
name=${1:?fixture name, e.g. v1}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [ ! -f "tests/fixtures/stores/$name/api-view.json" ]; then
  ENGRAM_WRITE_FIXTURE=$name cargo test --quiet --features postgres --test store_fixtures -- --ignored write_fixture
fi
pg=$(mktemp -d /tmp/engram-fixture-pg.XXXXXX)
trap 'tools/postgres/cluster.sh stop "$pg"' EXIT
url=$(tools/postgres/cluster.sh start "$pg")
ENGRAM_WRITE_FIXTURE=$name ENGRAM_WRITE_FIXTURE_PG="$url" \
  cargo test --quiet --features postgres --test store_fixtures -- --ignored write_fixture
echo "wrote tests/fixtures/stores/$name"
