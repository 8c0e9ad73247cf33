import { useState } from "react";
import { useMutation, useQuery } from "@tanstack/react-query";
import { get, post } from "../api";
import { ErrorView, Loading, useSpace, useTitle } from "../ui";

interface Health {
  status: string;
  version: string;
  embedding: { mode: string; model: string; dimension: number; degraded: boolean; message: string };
  reindex_needed: boolean;
  reindex: { pending: number; running: boolean; done: number; total: number; error: string | null };
  memory_count: number;
  generation: number;
  uptime_s: number;
  vector_index: { vectors: number; graph_points: number; tombstones: number; pending: number };
  encryption?: { encrypted: boolean; cipher?: string; key_source?: string; key_slots?: string[]; kdf?: string };
}

/** How a key source reads in a sentence (`key_file` is "key file"). */
const sourceName = (s: string | undefined) => (s ?? "key").replace(/_/g, " ");
interface ImportJob {
  job_id: string;
  status: string;
  progress: number;
  processed: number;
  total: number;
  error: string | null;
  counts?: Record<string, { inserted: number; updated: number; skipped: number }>;
}

/** `/ui/system`: health, statistics, export, import with progress, checkpoint. */
export function SystemView() {
  useTitle("System");
  const space = useSpace();
  const health = useQuery({ queryKey: ["health"], queryFn: () => get<Health>("/health") });
  const stats = useQuery({ queryKey: ["stats", space], queryFn: () => get<Record<string, number>>("/stats", { space_id: space }) });
  // An encrypted store's export is sealed to the store's own key: the console never leaves its plaintext on disk.
  const encrypted = health.data?.encryption?.encrypted === true;
  const exp = useMutation({
    mutationFn: () =>
      post<{ export_path: string; bytes: number; message: string; encrypted?: boolean }>("/data/export", encrypted ? { encrypt: true } : {}),
  });
  const checkpoint = useMutation({ mutationFn: () => post<{ message: string }>("/health/checkpoint") });
  const [importPath, setImportPath] = useState("");
  const [mode, setMode] = useState("merge");
  const [job, setJob] = useState("");
  const imp = useMutation({
    mutationFn: () => post<{ job_id: string }>("/data/import", { import_path: importPath, mode }),
    onSuccess: (r) => setJob(r.job_id),
  });
  const status = useQuery({
    queryKey: ["import", job],
    enabled: !!job,
    refetchInterval: (q) => (q.state.data && q.state.data.status !== "processing" ? false : 500),
    queryFn: () => get<ImportJob>(`/data/import/status/${encodeURIComponent(job)}`),
  });
  const h = health.data;
  return (
    <section aria-labelledby="sys-title">
      <h1 id="sys-title">System</h1>
      <div className="grid2">
        <div>
          <h2>Health</h2>
          <ErrorView error={health.error} />
          {health.isPending && <Loading />}
          {h && (
            <dl className="facts">
              <dt>Status</dt>
              <dd>{h.status}</dd>
              <dt>Version</dt>
              <dd>{h.version}</dd>
              <dt>Embedder</dt>
              <dd>
                {h.embedding.model} ({h.embedding.dimension} dimensions, {h.embedding.mode})
                {h.embedding.degraded && <strong> degraded: {h.embedding.message}</strong>}
              </dd>
              <dt>Vector index</dt>
              <dd>
                {h.vector_index.vectors.toLocaleString()} vectors, {h.vector_index.graph_points.toLocaleString()} in the HNSW graph,{" "}
                {h.vector_index.pending} pending, {h.vector_index.tombstones} tombstones
              </dd>
              <dt>Re-embedding</dt>
              <dd>
                {h.reindex.running ? (
                  <>
                    <progress max={h.reindex.total || 1} value={h.reindex.done} aria-label="Re-embedding progress" /> {h.reindex.done} of{" "}
                    {h.reindex.total}
                  </>
                ) : h.reindex_needed ? (
                  `${h.reindex.pending} pending`
                ) : (
                  "up to date"
                )}
              </dd>
              <dt>Encryption at rest</dt>
              <dd>
                {h.encryption?.encrypted ? (
                  <>
                    Encrypted ({h.encryption.cipher}), opened with its {sourceName(h.encryption.key_source)}; key slots:{" "}
                    {(h.encryption.key_slots ?? []).map(sourceName).join(", ")}
                    {h.encryption.kdf && <> (Argon2id {h.encryption.kdf})</>}
                  </>
                ) : (
                  <>
                    Not encrypted (<code>engram encrypt</code> encrypts it, with the daemon stopped)
                  </>
                )}
              </dd>
              <dt>Memories</dt>
              <dd>{h.memory_count.toLocaleString()}</dd>
              <dt>Generation</dt>
              <dd>{h.generation}</dd>
              <dt>Up for</dt>
              <dd>{Math.round(h.uptime_s)} s</dd>
            </dl>
          )}
        </div>
        <div>
          <h2>Statistics ({space})</h2>
          <ErrorView error={stats.error} />
          {stats.data && (
            <dl className="facts">
              {Object.entries(stats.data).map(([k, v]) => (
                <div key={k} className="pair">
                  <dt>{k.replace(/_/g, " ")}</dt>
                  <dd>{typeof v === "number" ? v.toLocaleString() : String(v)}</dd>
                </div>
              ))}
            </dl>
          )}
        </div>
      </div>
      <h2>Export and import</h2>
      <div className="row">
        <button type="button" disabled={exp.isPending} onClick={() => exp.mutate()}>
          Export everything
        </button>
        <button type="button" disabled={checkpoint.isPending} onClick={() => checkpoint.mutate()}>
          Checkpoint
        </button>
      </div>
      {exp.isPending && <Loading what="Exporting" />}
      {exp.data && (
        <p role="status">
          {exp.data.message} ({exp.data.bytes.toLocaleString()} bytes{exp.data.encrypted ? ", sealed to this store's key" : ""})
        </p>
      )}
      {checkpoint.data && <p role="status">{checkpoint.data.message}</p>}
      <ErrorView error={exp.error ?? checkpoint.error} />
      <form
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          imp.mutate();
        }}
      >
        <label>
          Archive on the daemon's disk <input required value={importPath} onChange={(e) => setImportPath(e.target.value)} placeholder="exports/engram-export-….zip" />
        </label>
        <label>
          Mode{" "}
          <select value={mode} onChange={(e) => setMode(e.target.value)}>
            <option value="merge">merge</option>
            <option value="skip">skip</option>
            <option value="overwrite">overwrite</option>
          </select>
        </label>
        <button type="submit" disabled={imp.isPending}>
          Import
        </button>
      </form>
      <ErrorView error={imp.error ?? status.error} />
      {status.data && (
        <p role="status">
          <progress max={100} value={status.data.progress} aria-label="Import progress" /> {status.data.status}:{" "}
          {status.data.processed.toLocaleString()} of {status.data.total.toLocaleString()} records
          {status.data.error && ` (${status.data.error})`}
        </p>
      )}
    </section>
  );
}
