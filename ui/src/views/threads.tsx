import { useEffect, useState, type FormEvent } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useNavigate, useParams, useSearchParams } from "react-router";
import { call, get, post, type Memory, type Message, type Pagination, type Thread } from "../api";
import { ConfirmButton, Empty, ErrorView, Loading, Pager, SpaceLink, fmtTime, useSpace, useTitle } from "../ui";

const PAGE = 50;

/** `/ui/threads`: conversations, newest first, with search and import. */
export function ThreadsView() {
  useTitle("Threads");
  const [params, setParams] = useSearchParams();
  const space = useSpace();
  const q = params.get("q") ?? "";
  const offset = Number(params.get("offset") ?? 0) || 0;
  const [draft, setDraft] = useState(q);
  useEffect(() => setDraft(q), [q]);
  const list = useQuery({
    queryKey: ["threads", space, q, offset],
    queryFn: async () => {
      if (q) {
        const r = await get<{ threads: Thread[] }>("/threads/search", { query: q, space_id: space, limit: PAGE });
        return { threads: r.threads, pagination: { limit: PAGE, offset: 0, total: r.threads.length, has_more: false } };
      }
      return get<{ threads: Thread[]; pagination: Pagination }>("/threads", { space_id: space, limit: PAGE, offset });
    },
    placeholderData: (p) => p,
  });
  function submit(e: FormEvent) {
    e.preventDefault();
    const next = new URLSearchParams(params);
    if (draft.trim()) next.set("q", draft.trim());
    else next.delete("q");
    next.delete("offset");
    setParams(next);
  }
  return (
    <section aria-labelledby="threads-title">
      <h1 id="threads-title">Threads</h1>
      <form role="search" className="searchbar" onSubmit={submit}>
        <label htmlFor="thread-q" className="sr-only">
          Search threads
        </label>
        <input id="thread-q" type="search" placeholder="Search threads" value={draft} onChange={(e) => setDraft(e.target.value)} />
        <button type="submit">Search</button>
      </form>
      <ImportThread />
      <ErrorView error={list.error} />
      {list.isPending && <Loading />}
      {list.data && list.data.threads.length === 0 && <Empty>No threads.</Empty>}
      {list.data && list.data.threads.length > 0 && (
        <>
          <table className="list" aria-label="Threads">
            <thead>
              <tr>
                <th scope="col">Thread</th>
                <th scope="col">Messages</th>
                <th scope="col">Source</th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {list.data.threads.map((t) => (
                <tr key={t.id}>
                  <td>
                    <SpaceLink to={`/threads/${encodeURIComponent(t.id)}`}>{t.title || t.summary || t.id}</SpaceLink>
                  </td>
                  <td>{t.message_count}</td>
                  <td>{t.source}</td>
                  <td>{new Date(t.updated_at).toLocaleDateString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {!q && (
            <Pager
              offset={offset}
              limit={PAGE}
              total={list.data.pagination.total}
              onOffset={(o) => {
                const next = new URLSearchParams(params);
                if (o) next.set("offset", String(o));
                else next.delete("offset");
                setParams(next);
              }}
            />
          )}
        </>
      )}
    </section>
  );
}

/** Import a chat transcript (markdown with `User:` / `Assistant:` lines, or the JSON of one thread). */
function ImportThread() {
  const space = useSpace();
  const qc = useQueryClient();
  const [result, setResult] = useState("");
  const run = useMutation({
    mutationFn: async (file: File) => {
      const text = await file.text();
      let body: Record<string, unknown>;
      if (file.name.toLowerCase().endsWith(".json")) {
        body = JSON.parse(text) as Record<string, unknown>;
        if (!body.space_id) body.space_id = space;
      } else {
        body = { title: file.name.replace(/\.[^.]+$/, ""), markdown_content: text, source: "console", space_id: space };
      }
      return post<{ imported_count: number; failed_count: number; results: { error?: string | null; message_count?: number }[] }>(
        "/threads/import",
        body,
      );
    },
    onSuccess: (r) => {
      const failed = r.results.filter((x) => x.error).map((x) => x.error);
      setResult(
        r.failed_count > 0 ? `Import failed: ${failed.join("; ")}` : `Imported ${r.imported_count} thread(s), ${r.results[0]?.message_count ?? 0} messages.`,
      );
      void qc.invalidateQueries({ queryKey: ["threads"] });
    },
  });
  return (
    <div className="card">
      <label>
        Import a chat file (.md, .txt or .json){" "}
        <input
          type="file"
          accept=".md,.markdown,.txt,.json"
          onChange={(e) => {
            const f = e.target.files?.[0];
            if (f) run.mutate(f);
            e.target.value = "";
          }}
        />
      </label>
      {run.isPending && <Loading what="Importing" />}
      <ErrorView error={run.error} />
      {result && <p role="status">{result}</p>}
    </div>
  );
}

/** `/ui/threads/{id}`: the messages, each with the memories extracted from it beside it. */
export function ThreadDetail() {
  const { id = "" } = useParams();
  const space = useSpace();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const thread = useQuery({
    queryKey: ["thread", id],
    queryFn: () => get<{ thread: Thread; messages: Message[] }>(`/threads/${encodeURIComponent(id)}`, { limit: 1000 }),
  });
  const memories = useQuery({
    queryKey: ["thread-memories", id, space],
    queryFn: () =>
      get<{ memories: Memory[] }>("/memories", { source_thread_id: id, space_id: space, state: "all", limit: 100 }),
  });
  const del = useMutation({
    mutationFn: () => call("DELETE", `/threads/${encodeURIComponent(id)}`),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ["threads"] });
      navigate(space === "default" ? "/threads" : `/threads?space=${space}`);
    },
  });
  useTitle(thread.data?.thread.title || "Thread");
  // Scroll to `#message-N` once the messages are there (links from a memory's provenance).
  useEffect(() => {
    if (!thread.data || !window.location.hash) return;
    document.getElementById(window.location.hash.slice(1))?.scrollIntoView({ block: "center" });
  }, [thread.data]);
  if (thread.isPending) return <Loading />;
  if (thread.error) return <ErrorView error={thread.error} />;
  const byMessage = new Map<number, Memory[]>();
  for (const m of memories.data?.memories ?? []) {
    const idx = Array.isArray(m.metadata.source_message_indices) ? (m.metadata.source_message_indices as number[]) : [];
    for (const i of idx.slice(0, 1)) byMessage.set(i, [...(byMessage.get(i) ?? []), m]);
  }
  const t = thread.data.thread;
  return (
    <article aria-labelledby="thread-title" className="detail">
      <p>
        <SpaceLink to="/threads">← Threads</SpaceLink>
      </p>
      <div className="row">
        <h1 id="thread-title">{t.title || t.id}</h1>
        <ConfirmButton label="Delete thread" confirm="Delete it and its messages?" danger onConfirm={() => del.mutate()} />
      </div>
      <p className="muted">
        {t.message_count} messages · created {fmtTime(t.created_at)}
        {t.source && ` · from ${t.source}`}
      </p>
      <ErrorView error={del.error ?? memories.error} />
      <ol className="messages">
        {thread.data.messages.map((msg) => (
          <li key={msg.id} id={`message-${msg.order_index}`} className={`message ${msg.role}`}>
            <div className="bubble">
              <strong>{msg.role}</strong>
              <p>{msg.content}</p>
            </div>
            <div className="extracted" aria-label={`Memories from message ${msg.order_index + 1}`}>
              {(byMessage.get(msg.order_index) ?? []).map((m) => (
                <SpaceLink key={m.id} to={`/memories/${encodeURIComponent(m.id)}`} className="chip memory">
                  {m.unit_type}: {m.title || m.content.slice(0, 60)}
                </SpaceLink>
              ))}
            </div>
          </li>
        ))}
      </ol>
    </article>
  );
}
