import { useState, type FormEvent } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useNavigate, useParams } from "react-router";
import { call, get, post, type Source } from "../api";
import { ConfirmButton, Empty, ErrorView, Loading, MarkdownText, SpaceLink, fmtTime, useSpace, useTitle } from "../ui";

interface SourceRow extends Source {
  summary: string;
  chunk_count: number;
  memory_count: number;
  source_url: string;
  section_tree: string;
  error_message: string;
}

interface Column {
  name: string;
  dtype: string;
  count: number;
  null_count: number;
  unique_count: number;
  min: number | string | null;
  max: number | string | null;
  mean: number | null;
  top: { value: string; count: number }[];
}

interface WikiIndex {
  communities: {
    community_id: number;
    title: string;
    summary: string;
    entities: { entity_id: string; name: string; entity_type: string }[];
  }[];
}

/** `/ui/library`: sources (upload, URL), the wiki, and the wiki and OKF exports. */
export function LibraryView() {
  useTitle("Library");
  const space = useSpace();
  const sources = useQuery({
    queryKey: ["sources", space],
    queryFn: () => get<{ sources: SourceRow[]; total: number }>("/sources", { space_id: space, limit: 100 }),
  });
  const wiki = useQuery({
    queryKey: ["wiki-index"],
    queryFn: () => get<WikiIndex>("/library/wiki-index", { community_limit: 50 }),
  });
  return (
    <section aria-labelledby="lib-title">
      <h1 id="lib-title">Library</h1>
      <div className="grid2">
        <Upload />
        <IngestUrl />
      </div>
      <h2>Sources</h2>
      <ErrorView error={sources.error} />
      {sources.isPending && <Loading />}
      {sources.data && sources.data.sources.length === 0 && <Empty>No sources yet: upload a file or give a URL.</Empty>}
      {sources.data && sources.data.sources.length > 0 && (
        <table className="list" aria-label="Sources">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Type</th>
              <th scope="col">Chunks</th>
              <th scope="col">Memories</th>
              <th scope="col">Added</th>
            </tr>
          </thead>
          <tbody>
            {sources.data.sources.map((s) => (
              <tr key={s.id}>
                <td>
                  <SpaceLink to={`/library/sources/${encodeURIComponent(s.id)}`}>{s.original_name || s.source_url || s.id}</SpaceLink>
                </td>
                <td>{s.mime_type}</td>
                <td>{s.chunk_count}</td>
                <td>{s.memory_count}</td>
                <td>{new Date(s.created_at).toLocaleDateString()}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Wiki</h2>
      <p>
        <a href="/library/wiki-export" download>
          Download the wiki (ZIP)
        </a>{" "}
        ·{" "}
        <a href="/library/okf-export" download>
          Download the OKF export (ZIP)
        </a>
      </p>
      <ErrorView error={wiki.error} />
      {wiki.data && wiki.data.communities.length === 0 && <Empty>No topics yet: they appear once memories mention entities.</Empty>}
      <ul className="plain wiki-index">
        {(wiki.data?.communities ?? []).map((c) => (
          <li key={c.community_id}>
            <SpaceLink to={`/library/wiki/topic/${c.community_id}`}>{c.title}</SpaceLink>
            <p className="muted">{c.summary}</p>
            <p>
              {c.entities.slice(0, 8).map((e) => (
                <SpaceLink key={e.entity_id} className="chip" to={`/library/wiki/entity/${encodeURIComponent(e.entity_id)}`}>
                  {e.name}
                </SpaceLink>
              ))}
            </p>
          </li>
        ))}
      </ul>
    </section>
  );
}

function Upload() {
  const space = useSpace();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const run = useMutation({
    mutationFn: (file: File) => {
      const form = new FormData();
      form.append("file", file, file.name);
      return call<{ id: string }>("POST", "/sources/ingest/file", { form, query: { space_id: space } });
    },
    onSuccess: (r) => {
      void qc.invalidateQueries({ queryKey: ["sources"] });
      navigate(`/library/sources/${encodeURIComponent(r.id)}${space === "default" ? "" : `?space=${space}`}`);
    },
  });
  return (
    <div className="card">
      <label>
        Upload a file (markdown, text, HTML, PDF, DOCX, CSV, TSV){" "}
        <input
          type="file"
          accept=".md,.markdown,.txt,.html,.htm,.pdf,.docx,.csv,.tsv"
          onChange={(e) => {
            const f = e.target.files?.[0];
            if (f) run.mutate(f);
            e.target.value = "";
          }}
        />
      </label>
      {run.isPending && <Loading what="Reading the file" />}
      <ErrorView error={run.error} />
    </div>
  );
}

function IngestUrl() {
  const space = useSpace();
  const qc = useQueryClient();
  const [url, setUrl] = useState("");
  const run = useMutation({
    mutationFn: () => post<{ id: string; original_name: string }>("/sources/ingest/url", { url, space_id: space }),
    onSuccess: () => {
      setUrl("");
      void qc.invalidateQueries({ queryKey: ["sources"] });
    },
  });
  function submit(e: FormEvent) {
    e.preventDefault();
    run.mutate();
  }
  return (
    <form className="card" onSubmit={submit}>
      <label>
        Ingest a web page <input type="url" required placeholder="https://…" value={url} onChange={(e) => setUrl(e.target.value)} />
      </label>
      <button type="submit" disabled={run.isPending}>
        Ingest
      </button>
      <ErrorView error={run.error} />
      {run.data && <p role="status">Added {run.data.original_name}.</p>}
    </form>
  );
}

interface Section {
  title?: string;
  heading?: string;
  level?: number;
  children?: Section[];
}

function Sections({ items }: { items: Section[] }) {
  if (items.length === 0) return null;
  return (
    <ul>
      {items.map((s, i) => (
        <li key={i}>
          {s.title ?? s.heading ?? ""}
          {s.children && <Sections items={s.children} />}
        </li>
      ))}
    </ul>
  );
}

/** `/ui/library/sources/{id}`: the source's text with its sections, and a data table's column statistics. */
export function SourceDetail() {
  const { id = "" } = useParams();
  const space = useSpace();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const path = `/sources/${encodeURIComponent(id)}`;
  const source = useQuery({ queryKey: ["source", id], queryFn: () => get<SourceRow>(path) });
  const content = useQuery({
    queryKey: ["source-content", id],
    queryFn: () => get<{ content: string; total_length: number; has_more: boolean }>(`${path}/content`, { limit: 200000 }),
  });
  const isTable = source.data && /csv|tab-separated|tsv/.test(source.data.mime_type ?? "");
  const analysis = useQuery({
    queryKey: ["source-analysis", id],
    enabled: !!isTable,
    queryFn: () => get<{ sheets: { sheet_name: string; row_count: number; columns: Column[] }[] }>(`${path}/analysis`),
  });
  const del = useMutation({
    mutationFn: () => call("DELETE", path),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ["sources"] });
      navigate(space === "default" ? "/library" : `/library?space=${space}`);
    },
  });
  useTitle(source.data?.original_name || "Source");
  if (source.isPending) return <Loading />;
  if (source.error) return <ErrorView error={source.error} />;
  const s = source.data;
  let sections: Section[] = [];
  try {
    const parsed: unknown = JSON.parse(s.section_tree || "[]");
    if (Array.isArray(parsed)) sections = parsed as Section[];
  } catch {
    sections = [];
  }
  return (
    <article className="detail" aria-labelledby="source-title">
      <p>
        <SpaceLink to="/library">← Library</SpaceLink>
      </p>
      <div className="row">
        <h1 id="source-title">{s.original_name || s.source_url || s.id}</h1>
        <ConfirmButton label="Delete source" confirm="Delete it and its memories?" danger onConfirm={() => del.mutate()} />
      </div>
      <p className="muted">
        {s.mime_type} · {s.size_bytes?.toLocaleString()} bytes · {s.chunk_count} chunks · {s.memory_count} memories · added{" "}
        {fmtTime(s.created_at)}
      </p>
      <ErrorView error={del.error} />
      {sections.length > 0 && (
        <nav aria-label="Sections" className="card">
          <h2>Sections</h2>
          <Sections items={sections} />
        </nav>
      )}
      {analysis.data && (
        <section aria-labelledby="stats-title">
          <h2 id="stats-title">Columns</h2>
          {analysis.data.sheets.map((sheet) => (
            <table key={sheet.sheet_name} className="list" aria-label={`Column statistics of ${sheet.sheet_name}`}>
              <caption>
                {sheet.sheet_name}: {sheet.row_count.toLocaleString()} rows
              </caption>
              <thead>
                <tr>
                  <th scope="col">Column</th>
                  <th scope="col">Type</th>
                  <th scope="col">Values</th>
                  <th scope="col">Empty</th>
                  <th scope="col">Distinct</th>
                  <th scope="col">Min</th>
                  <th scope="col">Max</th>
                  <th scope="col">Mean</th>
                  <th scope="col">Most common</th>
                </tr>
              </thead>
              <tbody>
                {sheet.columns.map((c) => (
                  <tr key={c.name}>
                    <th scope="row">{c.name}</th>
                    <td>{c.dtype}</td>
                    <td>{c.count}</td>
                    <td>{c.null_count}</td>
                    <td>{c.unique_count}</td>
                    <td>{c.min ?? ""}</td>
                    <td>{c.max ?? ""}</td>
                    <td>{c.mean === null ? "" : Number(c.mean.toFixed(3))}</td>
                    <td>{c.top.slice(0, 3).map((t) => `${t.value} (${t.count})`).join(", ")}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ))}
        </section>
      )}
      <h2>Text</h2>
      <ErrorView error={content.error} />
      {content.data && <pre className="source-text">{content.data.content}</pre>}
    </article>
  );
}

/** `/ui/library/wiki/{entity|topic|crystal}/{id}`: a wiki page, markdown rendered through the sanitising
 * renderer. Links between wiki pages point at the API's routes; they are shown as text. */
export function WikiPage() {
  const { kind = "entity", id = "" } = useParams();
  const page = useQuery({
    queryKey: ["wiki", kind, id],
    queryFn: () => call<string>("GET", `/library/wiki-page/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`, { text: true }),
  });
  useTitle(`Wiki: ${id}`);
  return (
    <article className="detail">
      <p>
        <SpaceLink to="/library">← Library</SpaceLink> · <SpaceLink to="/graph">Graph</SpaceLink>
      </p>
      {page.isPending && <Loading />}
      <ErrorView error={page.error} />
      {page.data && <MarkdownText text={page.data} />}
    </article>
  );
}
