#!/usr/bin/env python3
"""Search load on a running `engram serve`: CLIENTS keep-alive HTTP clients send two-word hybrid searches
(`limit` 10; words of `benches/load.rs`'s vocabulary) for SECONDS; prints the daemon's RSS every 10 s (from
/proc/PID/status) and the searches' p50/p99 in milliseconds. Standard library only.

usage: tools/postgres/search-load.py PORT CLIENTS SECONDS PID [API_KEY]
"""
import http.client
import json
import random
import sys
import threading
import time

port, clients, seconds, pid = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
key = sys.argv[5] if len(sys.argv) > 5 else "k"
WORDS = ["coffee", "meeting", "project", "garden", "travel", "budget", "report", "family", "doctor", "music",
         "recipe", "deadline", "python", "rust", "invoice", "hiking", "weekend", "birthday", "office", "client",
         "server", "design", "review", "launch", "morning", "evening", "dinner", "airport", "hotel", "train", "book",
         "movie"]
latencies, errors, stop = [], [], time.time() + seconds


def rss_mib():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def run(seed):
    rnd = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port)
    while time.time() < stop:
        body = json.dumps({"query": " ".join(rnd.sample(WORDS, 2)), "limit": 10})
        started = time.perf_counter()
        conn.request("POST", "/memories/search", body, {"content-type": "application/json", "X-NMEM-API-Key": key})
        r = conn.getresponse()
        data = r.read()
        ms = (time.perf_counter() - started) * 1000
        if r.status != 200 or not json.loads(data):
            errors.append(r.status)
        else:
            latencies.append(ms)


threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
for t in threads:
    t.start()
peak = 0.0
while any(t.is_alive() for t in threads):
    time.sleep(10)
    now = rss_mib()
    peak = max(peak, now)
    print(f"  RSS {now:.0f} MiB", flush=True)
latencies.sort()
if not latencies:
    sys.exit(f"clients {clients}: no search answered ({len(errors)} errors)")
q = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))]
print(f"clients {clients}: {len(latencies)} searches, {len(errors)} errors, p50 {q(0.5):.1f} ms, "
      f"p99 {q(0.99):.1f} ms, peak RSS {peak:.0f} MiB")
