"""Side-by-side vector benchmark: Engram (daemon with caller-supplied vectors, the Rust library, and the Python
package in-process) against chromadb, LanceDB and sqlite-vec, on the same corpus and the same all-MiniLM-L6-v2
vectors, k = 10.

Run through run.sh (it makes the venv, the corpus and the vectors). Each store runs in its own process, so that
peak RSS is its own; all run in one invocation and print one table with ratios to the best peer.

Per store: insert docs/s, seconds from the first write until searches run at full speed (index built), disk
(MiB, after close), peak RSS above the data the process loaded for the benchmark (MiB; the daemon: its own peak
RSS), search p50/p99 (ms, one query at a time), recall@10 against exact search over the same vectors.
"""
import argparse
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

DIM = 384


def status_mib(key, pid="self"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024.0
    return 0.0


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def dir_mib(path):
    if os.path.isfile(path):
        return os.path.getsize(path) / 1048576.0
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total / 1048576.0


def load(data, n, queries):
    texts = [json.loads(line)["text"] for line in open(os.path.join(data, "corpus.jsonl"), encoding="utf-8")]
    vecs = np.fromfile(os.path.join(data, "corpus.f32"), dtype="<f4").reshape(-1, DIM)
    assert len(vecs) >= n + queries, f"{len(vecs)} vectors"
    return texts[:n], np.ascontiguousarray(vecs[:n]), texts[-queries:], np.ascontiguousarray(vecs[-queries:])


def truth(data, docs, qs):
    path = os.path.join(data, f"truth-{len(docs)}-{len(qs)}.npy")
    if os.path.exists(path):
        return np.load(path)
    out = np.empty((len(qs), 10), dtype=np.int64)
    for at in range(0, len(qs), 100):
        sims = qs[at : at + 100] @ docs.T
        top = np.argpartition(-sims, 10, axis=1)[:, :10]
        out[at : at + 100] = top
    np.save(path, out)
    return out


def recall(found, want):
    return sum(len(set(f) & set(w.tolist())) for f, w in zip(found, want)) / (10 * len(want))


def timed_queries(run, qs, qtexts):
    lat, found = [], []
    for q, t in zip(qs, qtexts):
        t0 = time.perf_counter()
        ids = run(q, t)
        lat.append((time.perf_counter() - t0) * 1000)
        found.append(ids)
    lat.sort()
    return lat[len(lat) // 2], lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))], found


# --- peers ----------------------------------------------------------------------------------------------------


def run_chroma(work, texts, docs, qs, qtexts):
    import chromadb

    client = chromadb.PersistentClient(path=work)
    col = client.create_collection("docs", metadata={"hnsw:space": "cosine"}, embedding_function=None)
    t0 = time.perf_counter()
    for at in range(0, len(docs), 5000):
        col.add(
            ids=[str(i) for i in range(at, min(at + 5000, len(docs)))],
            embeddings=docs[at : at + 5000],
            documents=texts[at : at + 5000],
        )
    insert_s = time.perf_counter() - t0
    p50, p99, found = timed_queries(
        lambda q, _t: [int(i) for i in col.query(query_embeddings=[q], n_results=10, include=[])["ids"][0]],
        qs,
        qtexts,
    )
    del col, client
    return dict(insert_s=insert_s, ready_s=insert_s, p50=p50, p99=p99, found=found, index="HNSW (hnswlib, M 16)")


def run_lancedb(work, texts, docs, qs, qtexts):
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(work)
    t0 = time.perf_counter()
    table = None
    for at in range(0, len(docs), 10000):
        part = docs[at : at + 10000]
        batch = pa.table(
            {
                "id": pa.array(range(at, at + len(part)), pa.int64()),
                "text": pa.array(texts[at : at + len(part)]),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(part.reshape(-1), pa.float32()), DIM),
            }
        )
        if table is None:
            table = db.create_table("docs", data=batch)
        else:
            table.add(batch)
    insert_s = time.perf_counter() - t0
    table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_HNSW_SQ")
    ready_s = time.perf_counter() - t0

    def search(q, _t):
        rows = table.search(q).distance_type("cosine").limit(10).select(["id"]).to_arrow()
        return rows.column("id").to_pylist()

    p50, p99, found = timed_queries(search, qs, qtexts)
    return dict(insert_s=insert_s, ready_s=ready_s, p50=p50, p99=p99, found=found, index="IVF_HNSW_SQ")


def run_sqlite_vec(work, texts, docs, qs, qtexts):
    import apsw
    import sqlite_vec

    path = os.path.join(work, "vec.db")
    conn = apsw.Connection(path)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute(f"create virtual table vec using vec0(embedding float[{DIM}] distance_metric=cosine)")
    conn.execute("create table docs(id integer primary key, text text)")
    t0 = time.perf_counter()
    with conn:
        conn.executemany(
            "insert into vec(rowid, embedding) values (?, ?)", ((i, docs[i].tobytes()) for i in range(len(docs)))
        )
        conn.executemany("insert into docs(id, text) values (?, ?)", enumerate(texts))
    insert_s = time.perf_counter() - t0

    def search(q, _t):
        return [r[0] for r in conn.execute("select rowid from vec where embedding match ? and k = 10", (q.tobytes(),))]

    p50, p99, found = timed_queries(search, qs, qtexts)
    conn.close()
    return dict(insert_s=insert_s, ready_s=insert_s, p50=p50, p99=p99, found=found, index="none (exact scan)")


# --- Engram ---------------------------------------------------------------------------------------------------


class Daemon:
    def __init__(self, binary, data_dir, key):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.key = key
        self.proc = subprocess.Popen(
            [binary, "serve", "--addr", f"127.0.0.1:{self.port}", "--data-dir", data_dir,
             "--embedding-model", "external:384", "--api-key", key, "--max-body-bytes", str(64 << 20)],
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(os.path.dirname(data_dir), "daemon.log"), "a"),
        )
        self.conn = None
        for _ in range(300):
            try:
                self.get("/livez")
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("daemon did not start")

    def request(self, method, path, body=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        try:
            self.conn.request(method, path, body=body, headers=headers)
            r = self.conn.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException):
            self.conn = None
            raise
        if r.status != 200:
            raise RuntimeError(f"{method} {path}: {r.status} {data[:300]!r}")
        return json.loads(data)

    def get(self, path):
        return self.request("GET", path)

    def wait_ready(self, n):
        while True:
            v = self.get("/health")["vector_index"]
            if v["vectors"] >= n and v["pending"] == 0 and v["graph_points"] > 0:
                return
            time.sleep(0.02)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=600)


def run_engram_daemon(work, texts, docs, qs, qtexts, binary):
    data_dir = os.path.join(work, "data")
    d = Daemon(binary, data_dir, "bench-key-0123456789")
    t0 = time.perf_counter()
    for at in range(0, len(docs), 1000):
        items = [
            {"id": f"s{i}", "content": texts[i], "embedding": [round(float(x), 7) for x in docs[i]]}
            for i in range(at, min(at + 1000, len(docs)))
        ]
        d.request("POST", "/memories/batch", json.dumps({"memories": items}))
    insert_s = time.perf_counter() - t0
    d.wait_ready(len(docs))
    ready_s = time.perf_counter() - t0

    # The query vector as base64 float32 and the compact result form (ids and scores): what a client that
    # holds numpy vectors sends, as chromadb's query gets the array and returns ids (`include=[]`).
    def search(q, t):
        packed = base64.b64encode(np.asarray(q, dtype="<f4").tobytes()).decode()
        body = json.dumps({"query": t, "query_embedding_base64": packed, "limit": 10, "retrieval": "vector",
                           "result_format": "compact"})
        return [int(h["id"][1:]) for h in d.request("POST", "/memories/search", body)]

    p50, p99, found = timed_queries(search, qs, qtexts)
    rss_first = status_mib("VmHWM:", d.proc.pid)
    d.stop()
    t1 = time.perf_counter()
    d = Daemon(binary, data_dir, "bench-key-0123456789")
    d.wait_ready(len(docs))
    search(qs[0], qtexts[0])
    reopen_s = time.perf_counter() - t1
    p50_again, p99_again, _ = timed_queries(search, qs[:200], qtexts[:200])
    rss_reopen = status_mib("VmHWM:", d.proc.pid)
    d.stop()
    return dict(insert_s=insert_s, ready_s=ready_s, p50=p50, p99=p99, found=found, rss=max(rss_first, rss_reopen),
                rss_first=rss_first, rss_reopen=rss_reopen, reopen_s=reopen_s, reopen_p50=p50_again,
                reopen_p99=p99_again, index="HNSW (own, M 16), saved graph")


def run_engram_library(work, texts, docs, qs, qtexts, bench, data):
    out = subprocess.run(
        [bench, "--dataset", data, "--n", str(len(docs)), "--queries", str(len(qs)), "--json"],
        check=True, capture_output=True, text=True,
    ).stdout
    r = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    return dict(insert_s=len(docs) / r["insert_docs_per_s"], ready_s=r["full_speed_after_s"], p50=r["search_p50_ms"],
                p99=r["search_p99_ms"], recall=r["recall_at_10"], rss=r["peak_rss_mib"], disk=r["disk_mib"],
                reopen_s=r["reopen_s"], index="HNSW (own, M 16), saved graph")


def run_engram_python(work, texts, docs, qs, qtexts):
    """Engram through its Python package (the wheel in this venv), in this process, as chromadb runs."""
    import engram

    store = engram.Store.open(os.path.join(work, "data"), "external:384")
    t0 = time.perf_counter()
    for at in range(0, len(docs), 5000):
        end = min(at + 5000, len(docs))
        store.add_many([{"id": f"s{i}", "content": texts[i]} for i in range(at, end)], embeddings=docs[at:end])
    insert_s = time.perf_counter() - t0
    while True:
        v = store.request("GET", "/health").json()["vector_index"]
        if v["vectors"] >= len(docs) and v["pending"] == 0 and v["graph_points"] > 0:
            break
        time.sleep(0.02)
    ready_s = time.perf_counter() - t0
    # Searches are timed with the store idle (graph repairs and the community recompute done), as the
    # library bench times them.
    assert store.wait_until_idle(3600)

    engine_ms = []

    def search(q, t):
        # Similarity alone, as the library bench and the peers rank (no entity, PageRank or decay priors).
        r = store.search_results(t, query_embedding=q, mode="vector", limit=10, priors=False)
        engine_ms.append(r.elapsed_ms)
        return [int(h.memory.id[1:]) for h in r.hits]

    lat = []

    def timed(q, t):
        t0 = time.perf_counter()
        ids = search(q, t)
        lat.append((time.perf_counter() - t0) * 1000)
        return ids

    p50, p99, found = timed_queries(timed, qs, qtexts)
    # The binding's own cost per search, in this process: the call's wall time minus the time the engine
    # measured inside itself (query conversion, the GIL release and re-take, the hit objects).
    binding = sorted(w - e for w, e in zip(lat, engine_ms))
    store.close()
    return dict(insert_s=insert_s, ready_s=ready_s, p50=p50, p99=p99, found=found, index="HNSW (own, M 16), saved graph",
                binding_p50=binding[len(binding) // 2], binding_p99=binding[int(round(0.99 * (len(binding) - 1)))])


STORES = {
    "engram-daemon": "Engram daemon (HTTP)",
    "engram-library": "Engram library",
    "engram-python": "Engram Python (in-process)",
    "chromadb": "chromadb",
    "lancedb": "LanceDB",
    "sqlite-vec": "sqlite-vec",
}
PEERS = ["chromadb", "lancedb", "sqlite-vec"]


def one(args):
    texts, docs, qtexts, qs = load(args.data, args.n, args.queries)
    want = truth(args.data, docs, qs)
    work = tempfile.mkdtemp(prefix=f"compare-{args.one}-", dir=args.work)
    base = status_mib("VmRSS:")
    reset_peak()
    if args.one == "chromadb":
        r = run_chroma(work, texts, docs, qs, qtexts)
    elif args.one == "lancedb":
        r = run_lancedb(work, texts, docs, qs, qtexts)
    elif args.one == "sqlite-vec":
        r = run_sqlite_vec(work, texts, docs, qs, qtexts)
    elif args.one == "engram-daemon":
        r = run_engram_daemon(work, texts, docs, qs, qtexts, args.engram)
    elif args.one == "engram-library":
        r = run_engram_library(work, texts, docs, qs, qtexts, args.library_bench, args.data)
    elif args.one == "engram-python":
        r = run_engram_python(work, texts, docs, qs, qtexts)
    else:
        raise SystemExit(f"unknown store {args.one}")
    if "rss" not in r:
        r["rss"] = status_mib("VmHWM:") - base
    if "recall" not in r:
        r["recall"] = recall(r.pop("found"), want)
    r.pop("found", None)
    if "disk" not in r:
        r["disk"] = dir_mib(work)
    shutil.rmtree(work, ignore_errors=True)
    r["store"] = args.one
    print(json.dumps(r), flush=True)


def table(results, n):
    rows = [
        ("insert docs/s", lambda r: n / r["insert_s"], True, "{:,.0f}"),
        ("s to full speed", lambda r: r["ready_s"], False, "{:.1f}"),
        ("disk MiB", lambda r: r["disk"], False, "{:.0f}"),
        ("peak RSS MiB", lambda r: r["rss"], False, "{:.0f}"),
        ("peak RSS KiB a memory", lambda r: r["rss"] * 1024 / n, False, "{:.1f}"),
        ("search p50 ms", lambda r: r["p50"], False, "{:.3f}"),
        ("search p99 ms", lambda r: r["p99"], False, "{:.3f}"),
        ("recall@10", lambda r: r["recall"], True, "{:.4f}"),
    ]
    names = [s for s in STORES if s in results]
    width = 26
    print("| figure | " + " | ".join(STORES[s] for s in names) + " |")
    print("|---|" + "---|" * len(names))
    for label, get, higher, fmt in rows:
        peers = [get(results[p]) for p in PEERS if p in results]
        best = (max(peers) if higher else min(peers)) if peers else None
        cells = []
        for s in names:
            v = get(results[s])
            cell = fmt.format(v)
            if best and s.startswith("engram"):
                cell += f" ({v / best:.2f}x best peer)"
            cells.append(cell)
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("| index | " + " | ".join(results[s]["index"] for s in names) + " |")
    for s in names:
        r = results[s]
        if "reopen_s" in r:
            print(f"{STORES[s]}: reopen until HNSW-speed searches {r['reopen_s']:.2f} s", end="")
            if "rss_first" in r:
                print(f"; daemon peak RSS {r['rss_first']:.0f} MiB while loading, {r['rss_reopen']:.0f} MiB after a "
                      f"restart ({r['rss_reopen'] * 1024 / n:.1f} KiB a memory); search after the restart p50 {r['reopen_p50']:.3f} ms, p99 {r['reopen_p99']:.3f} ms",
                      end="")
            print()
    if "engram-python" in results:
        py = results["engram-python"]
        print(f"binding cost in-process (each search's wall time minus the engine's own elapsed_ms): p50 "
              f"{py['binding_p50']:.3f} ms, p99 {py['binding_p99']:.3f} ms")
        if "engram-library" in results:
            rs = results["engram-library"]
            print(f"Python search p50 minus the Rust library bench's (two processes): {py['p50'] - rs['p50']:.3f} ms")
    _ = width


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--engram", help="engram binary (server feature)")
    ap.add_argument("--library-bench", help="the `vectors` bench binary")
    ap.add_argument("--stores", default=",".join(STORES))
    ap.add_argument("--work", default=None)
    ap.add_argument("--one")
    args = ap.parse_args()
    if args.one:
        return one(args)
    texts, docs, qtexts, qs = load(args.data, args.n, args.queries)
    truth(args.data, docs, qs)
    del texts, docs, qtexts, qs
    results = {}
    for store in args.stores.split(","):
        cmd = [sys.executable, __file__, "--one", store, "--data", args.data, "--n", str(args.n), "--queries",
               str(args.queries)]
        for flag, val in [("--engram", args.engram), ("--library-bench", args.library_bench), ("--work", args.work)]:
            if val:
                cmd += [flag, val]
        t0 = time.time()
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{store}: failed\n{out.stderr[-3000:]}", file=sys.stderr)
            continue
        results[store] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{store}: done in {time.time() - t0:.0f} s: {results[store]}", file=sys.stderr, flush=True)
    print(f"\n{args.n:,} documents, {args.queries:,} held-out queries, all-MiniLM-L6-v2 (384 dims), k = 10\n")
    table(results, args.n)


if __name__ == "__main__":
    main()
