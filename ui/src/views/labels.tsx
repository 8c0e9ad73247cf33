import { useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { call, get, post, type Label } from "../api";
import { ConfirmButton, Empty, ErrorView, Loading, fmtTime, useSpace, useTitle } from "../ui";

interface Health {
  vocabulary_size: number;
  unused_labels: number;
  singleton_labels: number;
  singleton_rate: number;
  memories: number;
  labelled_memories: number;
  coverage: number;
  labels_per_memory: number;
  canonical_fork_groups: number;
}
interface Candidate {
  source_id: string;
  target_id: string;
  source_name?: string;
  target_name?: string;
  similarity?: number;
}
interface Merge {
  merge_id: string;
  source: Label;
  target_id: string;
  moved_memory_ids: string[];
  merged_at: string;
  reversed_at: string | null;
}
interface MergePlan {
  plan_id: string;
  message: string;
  source: Label;
  target: Label;
}
interface Consolidation {
  groups: { canonical: string; survivor_id: string; merged_ids: string[]; edges: number }[];
}

/** `/ui/labels`: usage, health, merge candidates, merges with preview and reverse, the consolidation dry run. */
export function LabelsView() {
  useTitle("Labels");
  const space = useSpace();
  const qc = useQueryClient();
  const q = { space_id: space };
  const labels = useQuery({
    queryKey: ["labels", space, "usage"],
    queryFn: () => get<Label[]>("/labels", { ...q, limit: 200, order_by: "usage_count", order_desc: true }),
  });
  const health = useQuery({ queryKey: ["label-health", space], queryFn: () => get<Health>("/labels/health", q) });
  const candidates = useQuery({
    queryKey: ["label-candidates", space],
    queryFn: () => get<{ candidates: Candidate[] }>("/labels/merge-candidates", q),
  });
  const merges = useQuery({ queryKey: ["label-merges", space], queryFn: () => get<{ merges: Merge[] }>("/labels/merges", q) });
  const [source, setSource] = useState("");
  const [target, setTarget] = useState("");
  const refresh = () => {
    for (const k of ["labels", "label-health", "label-candidates", "label-merges", "memories"]) void qc.invalidateQueries({ queryKey: [k] });
  };
  const preview = useMutation({
    mutationFn: () => post<MergePlan>(`/labels/${encodeURIComponent(source)}/merge/preview`, { target_label_id: target }, q),
  });
  const apply = useMutation({
    mutationFn: () =>
      post(`/labels/${encodeURIComponent(source)}/merge/apply`, { target_label_id: target, plan_id: preview.data?.plan_id }, q),
    onSuccess: () => {
      preview.reset();
      setSource("");
      setTarget("");
      refresh();
    },
  });
  const reverse = useMutation({
    mutationFn: (id: string) => call("POST", `/labels/merges/${encodeURIComponent(id)}/reverse`, { query: q }),
    onSuccess: refresh,
  });
  const dryRun = useMutation({
    mutationFn: () => post<Consolidation>("/labels/consolidate", undefined, { ...q, dry_run: true }),
  });
  const name = (id: string) => labels.data?.find((l) => l.id === id)?.name ?? id;

  return (
    <section aria-labelledby="labels-title">
      <h1 id="labels-title">Labels</h1>
      <div className="grid2">
        <div>
          <h2>Usage</h2>
          <ErrorView error={labels.error} />
          {labels.isPending && <Loading />}
          {labels.data && labels.data.length === 0 && <Empty>No labels.</Empty>}
          {labels.data && labels.data.length > 0 && (
            <table className="list" aria-label="Label usage">
              <thead>
                <tr>
                  <th scope="col">Label</th>
                  <th scope="col">Memories</th>
                </tr>
              </thead>
              <tbody>
                {labels.data.map((l) => (
                  <tr key={l.id}>
                    <td>{l.name}</td>
                    <td>{l.usage_count}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
        <div>
          <h2>Health</h2>
          <ErrorView error={health.error} />
          {health.data && (
            <dl className="facts">
              <dt>Labels</dt>
              <dd>{health.data.vocabulary_size}</dd>
              <dt>Unused</dt>
              <dd>{health.data.unused_labels}</dd>
              <dt>Used once</dt>
              <dd>
                {health.data.singleton_labels} ({(health.data.singleton_rate * 100).toFixed(0)} %)
              </dd>
              <dt>Labelled memories</dt>
              <dd>
                {health.data.labelled_memories} of {health.data.memories} ({(health.data.coverage * 100).toFixed(0)} %)
              </dd>
              <dt>Same name, several spellings</dt>
              <dd>{health.data.canonical_fork_groups} groups</dd>
            </dl>
          )}
          <h2>Consolidation</h2>
          <button type="button" onClick={() => dryRun.mutate()}>
            Dry run
          </button>
          <ErrorView error={dryRun.error} />
          {dryRun.data && (
            <ul aria-label="Consolidation plan" aria-live="polite">
              {dryRun.data.groups.length === 0 && <li>Nothing to consolidate.</li>}
              {dryRun.data.groups.map((g) => (
                <li key={g.survivor_id}>
                  {g.merged_ids.map(name).join(", ")} → {g.canonical} ({g.edges} memories)
                </li>
              ))}
            </ul>
          )}
        </div>
      </div>
      <h2>Merge</h2>
      <ErrorView error={candidates.error} />
      {candidates.data && candidates.data.candidates.length > 0 && (
        <ul className="plain" aria-label="Merge candidates">
          {candidates.data.candidates.map((c) => (
            <li key={`${c.source_id}-${c.target_id}`}>
              {c.source_name ?? name(c.source_id)} → {c.target_name ?? name(c.target_id)}
              {c.similarity !== undefined && ` (similarity ${c.similarity.toFixed(2)})`}{" "}
              <button
                type="button"
                onClick={() => {
                  setSource(c.source_id);
                  setTarget(c.target_id);
                  preview.reset();
                }}
              >
                Use
              </button>
            </li>
          ))}
        </ul>
      )}
      <div className="row">
        <label>
          Merge{" "}
          <select aria-label="Label to merge" value={source} onChange={(e) => { setSource(e.target.value); preview.reset(); }}>
            <option value="">choose a label</option>
            {(labels.data ?? []).map((l) => (
              <option key={l.id} value={l.id}>
                {l.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          into{" "}
          <select aria-label="Label to merge into" value={target} onChange={(e) => { setTarget(e.target.value); preview.reset(); }}>
            <option value="">choose a label</option>
            {(labels.data ?? []).filter((l) => l.id !== source).map((l) => (
              <option key={l.id} value={l.id}>
                {l.name}
              </option>
            ))}
          </select>
        </label>
        <button type="button" disabled={!source || !target} onClick={() => preview.mutate()}>
          Preview
        </button>
        <button type="button" disabled={!preview.data || apply.isPending} onClick={() => apply.mutate()}>
          Merge
        </button>
      </div>
      {preview.data && (
        <p className="card" role="status">
          {preview.data.message}
        </p>
      )}
      <ErrorView error={preview.error ?? apply.error} />
      <h2>Merge history</h2>
      <ErrorView error={merges.error ?? reverse.error} />
      {merges.data && merges.data.merges.length === 0 && <Empty>No merges yet.</Empty>}
      <ul className="plain" aria-label="Merge history">
        {(merges.data?.merges ?? []).map((m) => (
          <li key={m.merge_id}>
            {m.source.name} → {name(m.target_id)} · {m.moved_memory_ids.length} memories · {fmtTime(m.merged_at)}{" "}
            {m.reversed_at ? (
              <span className="chip">reversed {fmtTime(m.reversed_at)}</span>
            ) : (
              <ConfirmButton label="Reverse" confirm="Reverse this merge?" onConfirm={() => reverse.mutate(m.merge_id)} />
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
