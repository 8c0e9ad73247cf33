import { useEffect, useMemo, useRef, useState, type FormEvent } from "react";
import { useQuery } from "@tanstack/react-query";
import { useNavigate, useSearchParams } from "react-router";
import Graph from "graphology";
import circlepack from "graphology-layout/circlepack";
import Sigma from "sigma";
import { EdgeLineProgram, NodePointProgram } from "sigma/rendering";
import type { MouseCoords } from "sigma/types";
import { get } from "../api";
import { Empty, ErrorView, Loading, useSpace, useTitle } from "../ui";

interface GraphNode {
  id: string;
  label: string;
  metadata: {
    entity_id: string;
    space_id: string;
    entity_type: string;
    mention_count: number;
    pagerank: number;
    community_id: number | null;
  };
}
interface GraphEdge {
  source: string;
  target: string;
  weight: number;
}
interface EntityGraph {
  nodes: GraphNode[];
  edges: GraphEdge[];
  total_entities: number;
  total_edges: number;
}
interface Community {
  id: number;
  title: string;
}

// Twelve colours that stay apart in light and dark themes (Tableau 10 plus two).
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#17becf", "#8c564b"];

/** A deterministic random stream (mulberry32), so a graph is laid out the same way every time. */
function seeded(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `/ui/graph`: entities and their RELATES_TO edges drawn with WebGL (sigma.js over graphology); communities
 * as colours and clusters (circle packing by community), PageRank as size. */
export function GraphView() {
  useTitle("Graph");
  const space = useSpace();
  const [params, setParams] = useSearchParams();
  const community = params.get("community") ?? "";
  const navigate = useNavigate();
  const data = useQuery({
    queryKey: ["graph", space],
    refetchInterval: false,
    queryFn: () => get<EntityGraph>("/library/graph", { space_id: space, max_entities: 5000, max_edges: 20000 }),
  });
  const communities = useQuery({
    queryKey: ["communities"],
    queryFn: () => get<{ communities: Community[] }>("/communities", { limit: 50 }),
  });
  const container = useRef<HTMLDivElement>(null);
  const sigma = useRef<Sigma | null>(null);
  const [focus, setFocus] = useState<string | null>(null);
  const [find, setFind] = useState("");
  const [matches, setMatches] = useState<GraphNode[]>([]);

  const graph = useMemo(() => {
    if (!data.data) return null;
    // Edges in the theme's quiet colour (the CSS variable `--edge`), so they stay behind labels in both themes.
    const edgeColor = getComputedStyle(document.documentElement).getPropertyValue("--edge").trim() || "#c9ced3";
    performance.mark("engram-graph-data");
    const g = new Graph({ type: "undirected", multi: false });
    // PageRank sets the size; before the first graph recompute (all zero) the mention count stands in.
    const ranked = data.data.nodes.some((n) => n.metadata.pagerank > 0);
    const weight = (n: GraphNode) => (ranked ? n.metadata.pagerank : n.metadata.mention_count);
    const top = Math.max(1e-9, ...data.data.nodes.map(weight));
    for (const n of data.data.nodes) {
      const c = n.metadata.community_id;
      g.addNode(n.id, {
        label: n.label,
        size: 4 + 14 * Math.sqrt(weight(n) / top),
        color: c === null ? "#8a9199" : PALETTE[c % PALETTE.length],
        community: c === null ? "none" : String(c),
        entity: n.metadata.entity_id,
        x: 0,
        y: 0,
      });
    }
    for (const e of data.data.edges) {
      if (g.hasNode(e.source) && g.hasNode(e.target) && !g.hasEdge(e.source, e.target)) {
        g.addEdge(e.source, e.target, { size: Math.min(4, 0.5 + Math.log2(1 + e.weight) / 2), color: edgeColor });
      }
    }
    circlepack.assign(g, { hierarchyAttributes: ["community"], rng: seeded(42) });
    performance.mark("engram-graph-laid-out");
    return g;
  }, [data.data]);

  useEffect(() => {
    if (!graph || !container.current || graph.order === 0) return;
    const started = performance.now();
    // One-pixel GL lines for edges, and no edges or labels while the camera moves: what keeps 20,000 edges
    // fluid on software WebGL.
    const s = new Sigma(graph, container.current, {
      renderEdgeLabels: false,
      // A camera animation may still ask for a frame while the view unmounts (its container already detached):
      // that frame is skipped instead of throwing.
      allowInvalidContainer: true,
      hideEdgesOnMove: true,
      hideLabelsOnMove: true,
      defaultEdgeType: "line",
      edgeProgramClasses: { line: EdgeLineProgram },
      nodeProgramClasses: { circle: NodePointProgram },
      labelRenderedSizeThreshold: 7,
      labelColor: { color: getComputedStyle(document.body).color || "#222" },
    });
    sigma.current = s;
    // Hovering picks the node under the pointer with a synchronous GPU readback (about 80 ms a move on software
    // WebGL). Skip it while a button is down (a drag pans, it hovers nothing) and do it at most every 100 ms.
    const captor = s.getMouseCaptor();
    const hover = captor.listeners("mousemove") as ((e: MouseCoords) => void)[];
    captor.removeAllListeners("mousemove");
    let lastPick = 0;
    captor.on("mousemove", (e: MouseCoords) => {
      const now = performance.now();
      const pressed = "buttons" in e.original && e.original.buttons !== 0;
      if (pressed || now - lastPick < 100) return;
      lastPick = now;
      hover.forEach((h) => h(e));
    });
    s.on("clickNode", ({ node }) => {
      const entity = graph.getNodeAttribute(node, "entity") as string;
      navigate(`/library/wiki/entity/${encodeURIComponent(entity)}${space === "default" ? "" : `?space=${space}`}`);
    });
    s.once("afterRender", () => {
      const ms = performance.now() - started;
      container.current?.setAttribute("data-drawn-ms", ms.toFixed(1));
      performance.mark("engram-graph-drawn");
    });
    container.current.setAttribute("data-nodes", String(graph.order));
    container.current.setAttribute("data-edges", String(graph.size));
    return () => {
      s.kill();
      sigma.current = null;
    };
  }, [graph, navigate, space]);

  // A community's subgraph: other nodes and edges are hidden; the focused entity and its neighbours stand out.
  useEffect(() => {
    const s = sigma.current;
    if (!s || !graph) return;
    const neighbours = focus && graph.hasNode(focus) ? new Set(graph.neighbors(focus)) : null;
    s.setSetting("nodeReducer", (node, attrs) => {
      const out = { ...attrs };
      if (community && attrs.community !== community) out.hidden = true;
      if (neighbours && node !== focus && !neighbours.has(node)) {
        out.color = "#d9dcdf";
        out.label = "";
      }
      if (node === focus) {
        out.highlighted = true;
        out.forceLabel = true;
      }
      return out;
    });
    s.setSetting("edgeReducer", (edge, attrs) => {
      const out = { ...attrs };
      const [a, b] = graph.extremities(edge);
      if (community && (graph.getNodeAttribute(a, "community") !== community || graph.getNodeAttribute(b, "community") !== community))
        out.hidden = true;
      if (focus && a !== focus && b !== focus) out.hidden = out.hidden || neighbours !== null;
      return out;
    });
  }, [graph, community, focus]);

  // The keyboard reaches everything the mouse does: arrows pan by a tenth of the view, + and - zoom, 0 resets,
  // Enter opens the focused entity's page.
  function onGraphKey(e: React.KeyboardEvent) {
    const s = sigma.current;
    if (!s) return;
    const camera = s.getCamera();
    const { x, y, ratio } = camera.getState();
    const step = 0.1 * ratio;
    const pan: Record<string, [number, number]> = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, step], ArrowDown: [0, -step] };
    if (pan[e.key]) {
      e.preventDefault();
      void camera.animate({ x: x + pan[e.key][0], y: y + pan[e.key][1] }, { duration: 100 });
    } else if (e.key === "+" || e.key === "=") {
      e.preventDefault();
      void camera.animatedZoom({ duration: 200 });
    } else if (e.key === "-") {
      e.preventDefault();
      void camera.animatedUnzoom({ duration: 200 });
    } else if (e.key === "0") {
      e.preventDefault();
      void camera.animatedReset({ duration: 200 });
    } else if (e.key === "Enter" && focus && graph?.hasNode(focus)) {
      e.preventDefault();
      const entity = graph.getNodeAttribute(focus, "entity") as string;
      navigate(`/library/wiki/entity/${encodeURIComponent(entity)}${space === "default" ? "" : `?space=${space}`}`);
    }
  }

  function onFind(e: FormEvent) {
    e.preventDefault();
    const needle = find.trim().toLowerCase();
    const found = (data.data?.nodes ?? []).filter((n) => n.label.toLowerCase().includes(needle)).slice(0, 8);
    setMatches(found);
    if (found[0]) show(found[0].id);
  }
  function show(id: string) {
    const s = sigma.current;
    setFocus(id);
    const d = s?.getNodeDisplayData(id);
    if (s && d) void s.getCamera().animate({ x: d.x, y: d.y, ratio: 0.2 }, { duration: 500 });
  }

  return (
    <section aria-labelledby="graph-title" className="graph-view">
      <h1 id="graph-title">Graph</h1>
      <div className="row">
        <form role="search" className="row" onSubmit={onFind}>
          <label>
            Find an entity <input type="search" value={find} onChange={(e) => setFind(e.target.value)} />
          </label>
          <button type="submit">Find</button>
        </form>
        <label>
          Community{" "}
          <select
            value={community}
            onChange={(e) => {
              const next = new URLSearchParams(params);
              if (e.target.value) next.set("community", e.target.value);
              else next.delete("community");
              setParams(next, { replace: true });
            }}
          >
            <option value="">all</option>
            {(communities.data?.communities ?? []).map((c) => (
              <option key={c.id} value={String(c.id)}>
                {c.title || `Community ${c.id}`}
              </option>
            ))}
          </select>
        </label>
        {focus && (
          <button type="button" className="link" onClick={() => setFocus(null)}>
            Clear focus
          </button>
        )}
      </div>
      {matches.length > 1 && (
        <ul className="chips" aria-label="Matching entities">
          {matches.map((m) => (
            <li key={m.id}>
              <button type="button" className="chip" onClick={() => show(m.id)}>
                {m.label}
              </button>
            </li>
          ))}
        </ul>
      )}
      <ErrorView error={data.error ?? communities.error} />
      {data.isPending && <Loading what="Loading the graph" />}
      {data.data && (
        <p className="muted">
          {data.data.nodes.length.toLocaleString()} of {data.data.total_entities.toLocaleString()} entities,{" "}
          {data.data.edges.length.toLocaleString()} edges. Scroll to zoom, drag to pan, click an entity to open its page.
        </p>
      )}
      {data.data && data.data.nodes.length === 0 && <Empty>No entities yet: they are extracted from memories.</Empty>}
      <div
        ref={container}
        className="sigma"
        role="application"
        aria-label="Entity graph: arrow keys pan, + and - zoom, 0 resets, Enter opens the found entity"
        tabIndex={0}
        onKeyDown={onGraphKey}
      />
    </section>
  );
}
