"""Real MCP clients against a running Engram daemon: each lists the tools, calls memory_add, then memory_search,
and must find the memory it added.

    python tools/mcp_client_check.py CLIENT BASE_URL KEY

CLIENT is one of:
  sdk1         the Python `mcp` SDK 1.x (`ClientSession` over `streamablehttp_client`), then tools/list followed by
               100 calls without a failure
  sdk2-legacy  the Python `mcp` SDK 2.x `Client`, mode "legacy" (initialize handshake)
  sdk2-auto    the same, mode "auto" (2026-07-28 `server/discover` first)
  langgraph    nowledge-mem-langgraph 0.1.1 (langchain-mcp-adapters; sends X-Nmem-Tool-Set: external-agent)
  fastmcp      the FastMCP 2.12 client on http://localhost:PORT/mcp (what the Claude Desktop bridge uses)

BASE_URL is the daemon, e.g. http://127.0.0.1:14299. Exit code 0 and a line starting with OK on success.
"""

import asyncio
import json
import os
import sys
import uuid


def result_object(r):
    """structuredContent, else the JSON text copy."""
    sc = getattr(r, "structured_content", None) or getattr(r, "structuredContent", None)
    if sc:
        return sc
    content = getattr(r, "content", None) or []
    return json.loads(content[0].text)


def found(sc, marker):
    return any(marker in (x.get("content", "") + (x.get("title") or "")) for x in sc.get("results", []))


async def sdk1(base, key):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    marker = f"sdk1-{uuid.uuid4().hex[:8]}"
    headers = {"APP": "Codex", "X-NMEM-API-Key": key}
    async with streamablehttp_client(f"{base}/mcp/", headers=headers) as (r, w, _):
        async with ClientSession(r, w) as s:
            init = await s.initialize()
            names = {t.name for t in (await s.list_tools()).tools}
            assert {"memory_add", "memory_search"} <= names, names
            res = await s.call_tool("memory_add", {"content": f"Decision {marker}: ship on Fridays", "labels": ["bb"]})
            assert not res.isError, res
            sc = result_object(await s.call_tool("memory_search", {"query": marker}))
            assert found(sc, marker), sc
            # tools/list followed by 100 calls without a failure.
            await s.list_tools()
            failures = 0
            for i in range(100):
                tool = ("memory_search", {"query": marker}) if i % 2 else ("read_working_memory", {})
                r = await s.call_tool(*tool)
                failures += bool(r.isError)
            assert failures == 0, f"{failures} of 100 calls failed"
            print("OK sdk1", init.protocolVersion, len(names), "tools, 100 calls, 0 failures")


async def sdk2(base, key, mode):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    marker = f"sdk2-{mode}-{uuid.uuid4().hex[:8]}"
    http = httpx2.AsyncClient(headers={"APP": "Claude Code", "X-NMEM-API-Key": key, "Authorization": f"Bearer {key}"})
    async with Client(streamable_http_client(f"{base}/mcp/", http_client=http), mode=mode) as c:
        assert {"memory_add", "memory_search"} <= {t.name for t in (await c.list_tools()).tools}
        r = await c.call_tool("memory_add", {"content": f"Decision {marker}", "title": marker, "labels": ["bb"]})
        assert not r.is_error, r
        sc = result_object(await c.call_tool("memory_search", {"query": marker}))
        assert found(sc, marker), sc
        print("OK sdk2", mode, sc["total_found"])


async def langgraph(base, key):
    os.environ["NMEM_API_URL"] = base
    os.environ["NMEM_API_KEY"] = key
    from nowledge_mem_langgraph import NowledgeClient

    marker = f"lg-{uuid.uuid4().hex[:8]}"
    tools = {t.name: t for t in await NowledgeClient().tools()}
    assert len(tools) == 16, sorted(tools)
    await tools["memory_add"].ainvoke({"content": f"LangGraph note {marker}"})
    out = str(await tools["memory_search"].ainvoke({"query": marker}))
    assert marker in out, out
    print("OK langgraph", len(tools), "tools")


async def fastmcp(base, key):
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    port = base.rsplit(":", 1)[1]
    marker = f"fastmcp-{uuid.uuid4().hex[:8]}"
    transport = StreamableHttpTransport(f"http://localhost:{port}/mcp", headers={"APP": "Claude", "X-NMEM-API-Key": key})
    async with Client(transport) as c:
        names = {t.name for t in await c.list_tools()}
        assert {"memory_add", "memory_search"} <= names, names
        r = await c.call_tool("memory_add", {"content": f"FastMCP note {marker}"})
        assert not r.is_error, r
        r = await c.call_tool("memory_search", {"query": marker})
        sc = r.structured_content or json.loads(r.content[0].text)
        assert found(sc, marker), sc
        print("OK fastmcp", len(names), "tools")


def main():
    client, base, key = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3]
    runs = {
        "sdk1": lambda: sdk1(base, key),
        "sdk2-legacy": lambda: sdk2(base, key, "legacy"),
        "sdk2-auto": lambda: sdk2(base, key, "auto"),
        "langgraph": lambda: langgraph(base, key),
        "fastmcp": lambda: fastmcp(base, key),
    }
    asyncio.run(runs[client]())


if __name__ == "__main__":
    main()
