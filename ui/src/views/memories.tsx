import { useState, type FormEvent } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useNavigate, useParams, useSearchParams } from "react-router";
import { call, get, post, type Memory, type Pagination } from "../api";
import {
  ConfirmButton,
  Empty,
  ErrorView,
  Loading,
  MarkdownText,
  Pager,
  SpaceLink,
  fmtTime,
  useSpace,
  useTitle,
} from "../ui";
import { Filters, UNIT_TYPES, readFilters, type FilterState } from "./filters";

const PAGE = 50;
const ORDERS: [string, string][] = [
  ["recent", "Most recent"],
  ["importance", "Importance"],
  ["pagerank", "PageRank"],
];

/** `/ui/memories`: a paged list (50 a page, so the page stays small however large the store). */
export function MemoriesView() {
  useTitle("Memories");
  const [params, setParams] = useSearchParams();
  const space = useSpace();
  const offset = Number(params.get("offset") ?? 0) || 0;
  const order = params.get("order") ?? "recent";
  const withExpired = params.get("expired") === "1";
  const f = readFilters(params);
  const list = useQuery({
    queryKey: ["memories", space, offset, order, f, withExpired],
    queryFn: () =>
      get<{ memories: Memory[]; pagination: Pagination }>("/memories", {
        space_id: space,
        limit: PAGE,
        offset,
        order_by: order,
        labels: f.label ? [f.label] : undefined,
        unit_type: f.unit_type || undefined,
        state: f.state || undefined,
        recorded_date_from: f.from || undefined,
        recorded_date_to: f.to || undefined,
        include_expired: withExpired || undefined,
      }),
    placeholderData: (prev) => prev,
  });
  const [adding, setAdding] = useState(false);

  function update(changes: Record<string, string | null>) {
    const next = new URLSearchParams(params);
    for (const [k, v] of Object.entries(changes)) {
      if (v) next.set(k, v);
      else next.delete(k);
    }
    setParams(next);
  }

  return (
    <section aria-labelledby="mem-title">
      <div className="row">
        <h1 id="mem-title">Memories</h1>
        <button type="button" onClick={() => setAdding((a) => !a)} aria-expanded={adding}>
          Add a memory
        </button>
      </div>
      {adding && <AddMemory onDone={() => setAdding(false)} />}
      <div className="row">
        <label>
          Sort by{" "}
          <select value={order} onChange={(e) => update({ order: e.target.value, offset: null })}>
            {ORDERS.map(([v, l]) => (
              <option key={v} value={v}>
                {l}
              </option>
            ))}
          </select>
        </label>
        <label>
          <input
            type="checkbox"
            checked={withExpired}
            onChange={(e) => update({ expired: e.target.checked ? "1" : null, offset: null })}
          />{" "}
          Include expired
        </label>
      </div>
      <Filters
        value={f}
        onChange={(n: FilterState) => update({ ...n, offset: null } as unknown as Record<string, string | null>)}
      />
      <ErrorView error={list.error} />
      {list.isPending && <Loading />}
      {list.data && list.data.memories.length === 0 && <Empty>No memories here yet.</Empty>}
      {list.data && list.data.memories.length > 0 && (
        <>
          <table className="list" aria-label="Memories">
            <thead>
              <tr>
                <th scope="col">Memory</th>
                <th scope="col">Type</th>
                <th scope="col">Labels</th>
                <th scope="col">Importance</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {list.data.memories.map((m) => (
                <tr key={m.id}>
                  <td>
                    <SpaceLink to={`/memories/${encodeURIComponent(m.id)}`}>
                      {m.is_favorite ? "★ " : ""}
                      {m.title || m.content.slice(0, 100)}
                    </SpaceLink>
                    {m.state !== "active" && <span className="chip state">{m.state}</span>}
                    {m.expired && <span className="chip state">expired</span>}
                  </td>
                  <td>{m.unit_type}</td>
                  <td>{m.labels.join(", ")}</td>
                  <td>{m.importance.toFixed(2)}</td>
                  <td>{new Date(m.created_at).toLocaleDateString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <Pager
            offset={offset}
            limit={PAGE}
            total={list.data.pagination.total}
            onOffset={(o) => update({ offset: o ? String(o) : null })}
          />
        </>
      )}
    </section>
  );
}

function AddMemory({ onDone }: { onDone: () => void }) {
  const space = useSpace();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [title, setTitle] = useState("");
  const [content, setContent] = useState("");
  const [labels, setLabels] = useState("");
  const [unit, setUnit] = useState("");
  const [importance, setImportance] = useState("0.5");
  const [expires, setExpires] = useState("");
  const add = useMutation({
    mutationFn: () =>
      post<{ id?: string; memory?: Memory }>("/memories", {
        title: title || undefined,
        content,
        labels: labels
          .split(",")
          .map((l) => l.trim())
          .filter(Boolean),
        unit_type: unit || undefined,
        importance: Number(importance),
        expires_at: expires || undefined,
        space_id: space,
        source: "console",
      }),
    onSuccess: (r) => {
      void qc.invalidateQueries({ queryKey: ["memories"] });
      onDone();
      const id = r.id ?? r.memory?.id;
      if (id) navigate(`/memories/${encodeURIComponent(id)}${space === "default" ? "" : `?space=${space}`}`);
    },
  });
  function submit(e: FormEvent) {
    e.preventDefault();
    add.mutate();
  }
  return (
    <form className="card form" onSubmit={submit} aria-label="Add a memory">
      <label>
        Title
        <input value={title} onChange={(e) => setTitle(e.target.value)} />
      </label>
      <label>
        Content (markdown)
        <textarea required rows={4} value={content} onChange={(e) => setContent(e.target.value)} />
      </label>
      <label>
        Labels (comma-separated)
        <input value={labels} onChange={(e) => setLabels(e.target.value)} />
      </label>
      <label>
        Unit type
        <select value={unit} onChange={(e) => setUnit(e.target.value)}>
          <option value="">detect</option>
          {UNIT_TYPES.map((u) => (
            <option key={u}>{u}</option>
          ))}
        </select>
      </label>
      <label>
        Importance (0 to 1)
        <input type="number" min="0" max="1" step="0.05" value={importance} onChange={(e) => setImportance(e.target.value)} />
      </label>
      <label>
        Expires on (UTC date, optional)
        <input type="date" value={expires} onChange={(e) => setExpires(e.target.value)} />
      </label>
      <ErrorView error={add.error} />
      <div className="row">
        <button type="submit" disabled={add.isPending}>
          Save memory
        </button>
        <button type="button" className="link" onClick={onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}

interface Relation {
  id: string;
  source_memory_id: string;
  target_memory_id: string;
  relation_type: string;
  direction: string;
  source_title: string;
  target_title: string;
}

/** `/ui/memories/{id}`: everything about one memory, and every change a person may make to it. */
export function MemoryDetail() {
  const { id = "" } = useParams();
  const space = useSpace();
  const qc = useQueryClient();
  const path = `/memories/${encodeURIComponent(id)}`;
  const memory = useQuery({ queryKey: ["memory", id], queryFn: () => get<Memory>(path) });
  const relations = useQuery({
    queryKey: ["relations", id],
    queryFn: () => get<{ relations: Relation[] }>(`${path}/relations`),
  });
  const [editing, setEditing] = useState(false);
  const refresh = () => {
    void qc.invalidateQueries({ queryKey: ["memory", id] });
    void qc.invalidateQueries({ queryKey: ["relations", id] });
    void qc.invalidateQueries({ queryKey: ["memories"] });
  };
  const act = useMutation({
    mutationFn: ({ method, url, body }: { method: string; url: string; body?: unknown }) => call(method, url, { body }),
    onSuccess: refresh,
  });
  useTitle(memory.data?.title || "Memory");
  if (memory.isPending) return <Loading />;
  if (memory.error) return <ErrorView error={memory.error} />;
  const m = memory.data;
  const supersedes = Array.isArray(m.metadata.supersedes) ? (m.metadata.supersedes as string[]) : [];
  const supersededBy = typeof m.metadata.superseded_by === "string" ? m.metadata.superseded_by : "";
  const sourceId = typeof m.metadata.source_id === "string" ? m.metadata.source_id : "";
  const indices = Array.isArray(m.metadata.source_message_indices) ? (m.metadata.source_message_indices as number[]) : [];
  const patch = (body: Record<string, unknown>) => act.mutate({ method: "PATCH", url: path, body });

  return (
    <article aria-labelledby="memory-title" className="detail">
      <p>
        <SpaceLink to="/memories">← Memories</SpaceLink>
      </p>
      <div className="row">
        <h1 id="memory-title">
          {m.title || "(untitled)"} {m.expired && <span className="chip state">expired</span>}
        </h1>
        <button
          type="button"
          aria-pressed={m.is_favorite}
          onClick={() =>
            act.mutate({ method: "POST", url: `${path}/favorite?is_favorite=${m.is_favorite ? "false" : "true"}` })
          }
        >
          {m.is_favorite ? "★ Favourite" : "☆ Favourite"}
        </button>
        <button type="button" onClick={() => setEditing((e) => !e)} aria-expanded={editing}>
          Edit
        </button>
      </div>
      <ErrorView error={act.error} />
      {editing ? (
        <EditMemory memory={m} onSave={(b) => { patch(b); setEditing(false); }} onCancel={() => setEditing(false)} />
      ) : (
        <MarkdownText text={m.content} />
      )}
      <dl className="facts">
        <dt>State</dt>
        <dd>
          {m.state}
          {!m.is_latest && " (an older version)"}
        </dd>
        <dt>Unit type</dt>
        <dd>{m.unit_type}</dd>
        <dt>Importance</dt>
        <dd>{m.importance.toFixed(2)}</dd>
        <dt>Event time</dt>
        <dd>{m.event_start ? `${m.event_start}${m.event_end ? ` – ${m.event_end}` : ""}` : "none"}</dd>
        <dt>Expires</dt>
        <dd>
          {m.expires_at ? fmtTime(m.expires_at) : "never"}
          {m.expired && " (expired: out of search and listings)"}
        </dd>
        <dt>Created</dt>
        <dd>{fmtTime(m.created_at)}</dd>
        <dt>Space</dt>
        <dd>{m.space_id}</dd>
        <dt>Provenance</dt>
        <dd>
          {m.source_thread_id ? (
            <SpaceLink to={`/threads/${encodeURIComponent(m.source_thread_id)}${indices.length ? `#message-${indices[0]}` : ""}`}>
              thread message {indices.map((i) => i + 1).join(", ")}
            </SpaceLink>
          ) : sourceId ? (
            <SpaceLink to={`/library/sources/${encodeURIComponent(sourceId)}`}>source chunk</SpaceLink>
          ) : (
            m.source || "written directly"
          )}
        </dd>
        <dt>Version</dt>
        <dd>
          {m.version}
          {supersedes.length > 0 && (
            <>
              {" "}
              · supersedes{" "}
              {supersedes.map((s) => (
                <SpaceLink key={s} to={`/memories/${encodeURIComponent(s)}`}>
                  {s}
                </SpaceLink>
              ))}
            </>
          )}
          {supersededBy && (
            <>
              {" "}
              · superseded by <SpaceLink to={`/memories/${encodeURIComponent(supersededBy)}`}>{supersededBy}</SpaceLink>
            </>
          )}
        </dd>
      </dl>
      {Object.keys(m.metadata).length > 0 && (
        <details>
          <summary>Metadata</summary>
          <pre className="metadata">{JSON.stringify(m.metadata, null, 2)}</pre>
        </details>
      )}
      <LabelsEditor labels={m.labels} onChange={(labels) => patch({ labels })} />
      <section aria-labelledby="rel-title">
        <h2 id="rel-title">Relations</h2>
        <ErrorView error={relations.error} />
        {relations.data && relations.data.relations.length === 0 && <Empty>No relations.</Empty>}
        <ul className="plain">
          {(relations.data?.relations ?? []).map((r) => {
            const other = r.source_memory_id === m.id ? r.target_memory_id : r.source_memory_id;
            const otherTitle = r.source_memory_id === m.id ? r.target_title : r.source_title;
            return (
              <li key={r.id}>
                <span className="chip">{r.relation_type}</span> {r.source_memory_id === m.id ? "→" : "←"}{" "}
                <SpaceLink to={`/memories/${encodeURIComponent(other)}`}>{otherTitle || other}</SpaceLink>{" "}
                <ConfirmButton
                  label="Remove"
                  confirm="Remove relation?"
                  onConfirm={() => act.mutate({ method: "DELETE", url: `/memories/relations/${encodeURIComponent(r.id)}` })}
                />
              </li>
            );
          })}
        </ul>
        <AddRelation
          onAdd={(target, type) =>
            act.mutate({ method: "POST", url: `${path}/relations`, body: { target_memory_id: target, relation_type: type, space_id: space } })
          }
        />
      </section>
      <section aria-labelledby="life-title">
        <h2 id="life-title">Lifecycle</h2>
        <div className="row">
          <ConfirmButton label="Archive" confirm="Archive this memory?" disabled={m.state !== "active"} onConfirm={() => act.mutate({ method: "POST", url: `${path}/archive`, body: {} })} />
          <ConfirmButton label="Deprecate" confirm="Deprecate this memory?" disabled={m.state !== "active"} onConfirm={() => act.mutate({ method: "POST", url: `${path}/deprecate`, body: {} })} />
          <Supersede onSupersede={(newer) => act.mutate({ method: "POST", url: `${path}/supersede`, body: { newer_memory_id: newer } })} disabled={m.state !== "active"} />
          <ConfirmButton label="Forget" confirm="Forget it for good?" danger onConfirm={() => act.mutate({ method: "POST", url: `${path}/forget`, body: {} })} />
        </div>
      </section>
    </article>
  );
}

function EditMemory({
  memory,
  onSave,
  onCancel,
}: {
  memory: Memory;
  onSave: (b: Record<string, unknown>) => void;
  onCancel: () => void;
}) {
  const [title, setTitle] = useState(memory.title);
  const [content, setContent] = useState(memory.content);
  const [importance, setImportance] = useState(String(memory.importance));
  const [unit, setUnit] = useState<string>(memory.unit_type);
  const [event, setEvent] = useState(memory.event_start ?? "");
  const storedExpiry = memory.expires_at ? memory.expires_at.slice(0, 10) : "";
  const [expires, setExpires] = useState(storedExpiry);
  return (
    <form
      className="card form"
      aria-label="Edit memory"
      onSubmit={(e) => {
        e.preventDefault();
        const body: Record<string, unknown> = {
          title,
          content,
          importance: Number(importance),
          unit_type: unit,
          event_start: event || undefined,
        };
        // Only a changed expiry is sent: an emptied field clears it (null), an untouched one keeps the time.
        if (expires !== storedExpiry) body.expires_at = expires || null;
        onSave(body);
      }}
    >
      <label>
        Title
        <input name="title" value={title} onChange={(e) => setTitle(e.target.value)} />
      </label>
      <label>
        Content
        <textarea rows={6} value={content} onChange={(e) => setContent(e.target.value)} />
      </label>
      <label>
        Importance (0 to 1)
        <input type="number" min="0" max="1" step="0.05" value={importance} onChange={(e) => setImportance(e.target.value)} />
      </label>
      <label>
        Unit type
        <select value={unit} onChange={(e) => setUnit(e.target.value)}>
          {UNIT_TYPES.map((u) => (
            <option key={u}>{u}</option>
          ))}
        </select>
      </label>
      <label>
        Event time (YYYY, YYYY-MM or YYYY-MM-DD)
        <input value={event} onChange={(e) => setEvent(e.target.value)} />
      </label>
      <label>
        Expires on (UTC date; empty: never)
        <input type="date" value={expires} onChange={(e) => setExpires(e.target.value)} />
      </label>
      <div className="row">
        <button type="submit">Save</button>
        <button type="button" className="link" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function LabelsEditor({ labels, onChange }: { labels: string[]; onChange: (l: string[]) => void }) {
  const [draft, setDraft] = useState("");
  return (
    <section aria-labelledby="labels-title">
      <h2 id="labels-title">Labels</h2>
      <ul className="chips">
        {labels.map((l) => (
          <li key={l} className="chip label">
            {l}{" "}
            <button type="button" className="link" aria-label={`Remove label ${l}`} onClick={() => onChange(labels.filter((x) => x !== l))}>
              ×
            </button>
          </li>
        ))}
      </ul>
      <form
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          const name = draft.trim();
          if (name && !labels.includes(name)) onChange([...labels, name]);
          setDraft("");
        }}
      >
        <label>
          Add a label <input value={draft} onChange={(e) => setDraft(e.target.value)} />
        </label>
        <button type="submit">Add</button>
      </form>
    </section>
  );
}

function AddRelation({ onAdd }: { onAdd: (target: string, type: string) => void }) {
  const [target, setTarget] = useState("");
  const [type, setType] = useState("related");
  return (
    <form
      className="row"
      onSubmit={(e) => {
        e.preventDefault();
        if (target.trim()) onAdd(target.trim(), type.trim() || "related");
        setTarget("");
      }}
    >
      <label>
        Related memory id <input value={target} onChange={(e) => setTarget(e.target.value)} />
      </label>
      <label>
        Type <input value={type} onChange={(e) => setType(e.target.value)} />
      </label>
      <button type="submit">Add relation</button>
    </form>
  );
}

function Supersede({ onSupersede, disabled }: { onSupersede: (newer: string) => void; disabled: boolean }) {
  const [newer, setNewer] = useState("");
  return (
    <span className="row">
      <label>
        Newer memory id <input value={newer} disabled={disabled} onChange={(e) => setNewer(e.target.value)} />
      </label>
      <ConfirmButton
        label="Supersede"
        confirm="Supersede with it?"
        disabled={disabled || !newer.trim()}
        onConfirm={() => onSupersede(newer.trim())}
      />
    </span>
  );
}
