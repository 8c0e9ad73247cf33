import { useEffect, useRef, useState, type FormEvent } from "react";
import { useQuery } from "@tanstack/react-query";
import { useNavigate, useSearchParams } from "react-router";
import { post, type Hit } from "../api";
import { Empty, ErrorView, Highlight, Loading, queryTerms, useTitle } from "../ui";
import { Filters, filterQuery, type FilterState, readFilters } from "./filters";

/** `/ui/search?q=...`: hybrid search with the reason of each hit, its terms marked, and the exchange around it. */
export function SearchView() {
  useTitle("Search");
  const [params, setParams] = useSearchParams();
  const q = params.get("q") ?? "";
  const space = params.get("space") || "default";
  const withContext = params.get("context") === "1";
  const filters = readFilters(params);
  const [draft, setDraft] = useState(q);
  const [active, setActive] = useState(0);
  const box = useRef<HTMLInputElement>(null);
  const list = useRef<HTMLOListElement>(null);
  const navigate = useNavigate();

  useEffect(() => setDraft(q), [q]);

  // `/` focuses the search box from anywhere on the page but inside a text field.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const t = e.target as HTMLElement;
      if (e.key === "/" && !["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName) && !t.isContentEditable) {
        e.preventDefault();
        box.current?.focus();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  const results = useQuery({
    queryKey: ["search", space, q, withContext, filters],
    enabled: q.trim().length > 0,
    refetchInterval: false,
    queryFn: () =>
      post<Hit[]>("/memories/search", {
        query: q,
        limit: 20,
        space_id: space,
        include_context: withContext,
        context_window: 1,
        ...filterQuery(filters),
      }),
  });
  useEffect(() => setActive(0), [results.data]);

  function submit(e: FormEvent) {
    e.preventDefault();
    const next = new URLSearchParams(params);
    if (draft.trim()) next.set("q", draft.trim());
    else next.delete("q");
    setParams(next);
  }

  function setParam(name: string, value: string | null) {
    const next = new URLSearchParams(params);
    if (value) next.set(name, value);
    else next.delete(name);
    setParams(next, { replace: true });
  }

  const hits = results.data ?? [];
  const terms = queryTerms(q);
  function onListKey(e: React.KeyboardEvent) {
    if (hits.length === 0) return;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      const n = e.key === "ArrowDown" ? Math.min(hits.length - 1, active + 1) : Math.max(0, active - 1);
      setActive(n);
      list.current?.querySelectorAll<HTMLElement>("li.hit")[n]?.focus();
    } else if (e.key === "Enter") {
      e.preventDefault();
      open(hits[active]);
    }
  }
  function open(h: Hit | undefined) {
    if (!h) return;
    const keep = space === "default" ? "" : `?space=${encodeURIComponent(space)}`;
    navigate(`/memories/${encodeURIComponent(h.memory.id)}${keep}`);
  }

  return (
    <section aria-labelledby="search-title">
      <h1 id="search-title">Search</h1>
      <form role="search" onSubmit={submit} className="searchbar">
        <label htmlFor="q" className="sr-only">
          Search memories
        </label>
        <input
          id="q"
          ref={box}
          type="search"
          placeholder="Search memories (press / to focus)"
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "ArrowDown" && hits.length > 0) {
              e.preventDefault();
              setActive(0);
              list.current?.querySelector<HTMLElement>("li.hit")?.focus();
            }
          }}
          autoFocus
        />
        <button type="submit">Search</button>
        <label className="inline">
          <input
            type="checkbox"
            checked={withContext}
            onChange={(e) => setParam("context", e.target.checked ? "1" : null)}
          />
          Show the exchange around each hit
        </label>
      </form>
      <Filters value={filters} onChange={(f: FilterState) => setParams(filterParams(params, f), { replace: true })} />
      {results.isFetching && <Loading what="Searching" />}
      <ErrorView error={results.error} />
      {q && results.isSuccess && hits.length === 0 && <Empty>Nothing matches “{q}”.</Empty>}
      {!q && <Empty>Type a question or a few words; results combine BM25 and vector similarity.</Empty>}
      <ol className="hits" ref={list} onKeyDown={onListKey} aria-label="Results">
        {hits.map((h, i) => (
          <li
            key={h.memory.id}
            className={`hit${i === active ? " active" : ""}`}
            tabIndex={i === active ? 0 : -1}
            onClick={() => open(h)}
            onFocus={() => setActive(i)}
          >
            <div className="hit-head">
              <span className="title">
                <Highlight text={titleOf(h.memory.title, h.memory.content)} terms={terms} />
              </span>
              <span className="score" title="fused relevance score">
                {h.similarity_score.toFixed(3)}
              </span>
            </div>
            <p className="content">
              <Highlight text={h.memory.content} terms={terms} />
            </p>
            <p className="reason">{h.relevance_reason}</p>
            <p className="meta">
              <span className="chip">{h.memory.unit_type}</span>
              {h.memory.labels.map((l) => (
                <span key={l} className="chip label">
                  {l}
                </span>
              ))}
              <span className="muted">{new Date(h.memory.created_at).toLocaleDateString()}</span>
            </p>
            {withContext && h.context && h.context.length > 0 && (
              <ol className="context" aria-label="Exchange around the hit">
                {h.context.map((c) => (
                  <li key={`${c.kind}-${c.index}`} className={c.is_hit ? "is-hit" : undefined}>
                    {c.role && <strong>{c.role}: </strong>}
                    <Highlight text={c.content} terms={terms} />
                  </li>
                ))}
              </ol>
            )}
          </li>
        ))}
      </ol>
    </section>
  );
}

/** A hit's heading: its title, or the first words of its content when the title only repeats them. */
function titleOf(title: string, content: string): string {
  const words = content.split(/\s+/).slice(0, 12).join(" ");
  if (!title) return words;
  const bare = title.replace(/[.…]+$/, "");
  return content.includes(bare) && content.length > bare.length + 20 ? words + "…" : title;
}

function filterParams(params: URLSearchParams, f: FilterState): URLSearchParams {
  const next = new URLSearchParams(params);
  for (const [k, v] of Object.entries(f)) {
    if (v) next.set(k, v);
    else next.delete(k);
  }
  next.delete("offset");
  return next;
}
