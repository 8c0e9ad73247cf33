#!/usr/bin/env python3
"""GET /metrics read by a real Prometheus parser (the prometheus_client package from PyPI, its strict
OpenMetrics parser and its Prometheus text parser), on a daemon that answered a fixed mix of requests carrying
marker strings in texts, queries, ids, paths and request ids.

Checks: both parsers accept the text; every metric the Grafana dashboard of docs/ops/ queries exists; the request counter of every (route, method, status) equals the requests
sent; each latency histogram's count equals its counter and its buckets are cumulative; no label value holds a
marker or an id. Usage: metrics_check.py ENGRAM_BIN (run with a venv's python that has prometheus_client).
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_prometheus

KEY = "metrics-check-key-5d1e"
MARK = "WOMBATMARK"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base, method, path, body=None, key=True, headers=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {KEY}")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode(), {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), {k.lower(): v for k, v in e.headers.items()}


def main():
    exe = sys.argv[1]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as d:
        daemon = subprocess.Popen(
            [exe, "serve", "--addr", f"127.0.0.1:{port}", "--api-key", KEY, "--data-dir", d],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            check(base)
        finally:
            daemon.terminate()
            daemon.wait(timeout=60)


def check(base):
    for _ in range(600):
        try:
            if call(base, "GET", "/livez", key=False)[0] == 200:
                break
        except OSError:
            time.sleep(0.1)
    sent = {}

    def count(route, method, status):
        sent[(route, method, status)] = sent.get((route, method, status), 0) + 1

    count("/livez", "GET", "2xx")
    ids = []
    for i in range(4):
        s, body, _ = call(base, "POST", "/memories", {"content": f"{MARK} {i} the ferry leaves at nine"},
                          headers={"X-Request-Id": f"{MARK}-{i}"})
        assert s == 200, body
        ids.append(json.loads(body)["memory"]["id"])
        count("/memories", "POST", "2xx")
    for mid in ids:
        assert call(base, "GET", f"/memories/{mid}")[0] == 200
        count("/memories/{memory_id}", "GET", "2xx")
    for mode in ["hybrid", "lexical", "vector"]:
        s, body, _ = call(base, "POST", "/memories/search", {"query": f"{MARK} ferry", "retrieval": mode})
        assert s == 200, body
        count("/memories/search", "POST", "2xx")
    assert call(base, "GET", f"/memories/{MARK}-missing")[0] == 404
    count("/memories/{memory_id}", "GET", "4xx")
    assert call(base, "GET", f"/{MARK}/nowhere")[0] == 404
    count("unmatched", "GET", "4xx")
    assert call(base, "POST", "/memories", {"content": 7})[0] == 422
    count("/memories", "POST", "4xx")
    assert call(base, "GET", "/metrics", key=False)[0] == 401
    count("/metrics", "GET", "4xx")
    s, text, headers = call(base, "GET", "/metrics")
    assert s == 200 and headers["content-type"].startswith("application/openmetrics-text"), headers

    strict = {f.name: f for f in parse_openmetrics(text)}
    plain = {f.name: f for f in parse_prometheus(text)}
    assert "engram_http_requests" in strict and "engram_http_requests" in plain, sorted(strict)
    for fam in strict.values():
        for sample in fam.samples:
            for v in sample.labels.values():
                assert MARK not in v and not any(i in v for i in ids), (sample.name, sample.labels)
    got = {}
    for sample in strict["engram_http_requests"].samples:
        if sample.name == "engram_http_requests_total":
            got[(sample.labels["route"], sample.labels["method"], sample.labels["status"])] = sample.value
    assert got == sent, f"counters {got} != requests sent {sent}"
    hist = strict["engram_http_request_duration_seconds"]
    counts, buckets = {}, {}
    for sample in hist.samples:
        key = (sample.labels["route"], sample.labels["method"], sample.labels["status"])
        if sample.name.endswith("_count"):
            counts[key] = sample.value
        elif sample.name.endswith("_bucket"):
            buckets.setdefault(key, []).append((float(sample.labels["le"]), sample.value))
    assert counts == sent, f"histogram counts {counts} != counters {sent}"
    for key, bs in buckets.items():
        bs.sort()
        values = [v for _, v in bs]
        assert values == sorted(values) and bs[-1][0] == float("inf") and values[-1] == counts[key], (key, bs)
    memories = next(s.value for s in strict["engram_memories"].samples)
    assert memories == 4, memories
    modes = {s.labels["mode"] for s in strict["engram_search_duration_seconds"].samples}
    assert {"hybrid", "lexical", "vector"} <= modes, modes
    # The dashboard in the repository queries only metrics the daemon serves (histograms by their series names).
    series = {s.name for fam in strict.values() for s in fam.samples} | set(strict)
    series |= {n + suffix for n in strict for suffix in ("_bucket", "_count", "_sum", "_total")}
    dash = os.path.join(os.path.dirname(__file__), "..", "docs", "ops", "grafana-dashboard.json")
    exprs = [t["expr"] for p in json.load(open(dash))["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\b((?:engram|process)_[a-z0-9_]+)", e)}
    # A redb store without sync has no feed or sync gauges; a labelled family has no series before its first
    # event (no search has fallen back yet).
    optional = {"engram_postgres_feed_lag_entries", "engram_sync_pending_changes", "engram_search_fallbacks_total"}
    unknown = sorted(used - series - optional)
    assert not unknown, f"the dashboard queries metrics the daemon does not serve: {unknown}"
    print(f"metrics: {len(strict)} families parsed (OpenMetrics and Prometheus text), "
          f"{sum(sent.values())} requests over {len(sent)} route/method/status series counted exactly; "
          f"no marker or id in any label; the dashboard's {len(used)} metrics exist")


if __name__ == "__main__":
    main()
