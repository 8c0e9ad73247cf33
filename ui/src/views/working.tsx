import { useEffect, useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useSearchParams } from "react-router";
import { call, get } from "../api";
import { Empty, ErrorView, Loading, MarkdownText, fmtTime, useSpace, useTitle } from "../ui";

interface WorkingMemory {
  exists: boolean;
  content: string;
  date: string;
  last_modified: string | null;
}

/** `/ui/working-memory`: today's note (or a past day's, `?date=`), edit, and the days that have one. */
export function WorkingMemoryView() {
  useTitle("Working memory");
  const space = useSpace();
  const qc = useQueryClient();
  const [params, setParams] = useSearchParams();
  const date = params.get("date") ?? "";
  const note = useQuery({
    queryKey: ["working-memory", space, date],
    queryFn: () => get<WorkingMemory>("/agent/working-memory", { space_id: space, date: date || undefined }),
  });
  const history = useQuery({
    queryKey: ["working-memory-history", space],
    queryFn: () => get<{ history: { date: string; size_bytes: number; updated_at: string }[] }>("/agent/working-memory/history", { space_id: space, limit: 60 }),
  });
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState("");
  useEffect(() => {
    if (!editing) setDraft(note.data?.content ?? "");
  }, [note.data, editing]);
  const save = useMutation({
    mutationFn: () => call("PUT", "/agent/working-memory", { body: { content: draft, space_id: space } }),
    onSuccess: () => {
      setEditing(false);
      void qc.invalidateQueries({ queryKey: ["working-memory"] });
      void qc.invalidateQueries({ queryKey: ["working-memory-history"] });
    },
  });
  const today = !date;
  return (
    <section aria-labelledby="wm-title">
      <div className="row">
        <h1 id="wm-title">Working memory{note.data ? `: ${note.data.date}` : ""}</h1>
        {today && !editing && (
          <button type="button" onClick={() => setEditing(true)}>
            Edit
          </button>
        )}
      </div>
      <ErrorView error={note.error ?? save.error} />
      {note.isPending && <Loading />}
      {editing ? (
        <form
          className="card form"
          onSubmit={(e) => {
            e.preventDefault();
            save.mutate();
          }}
        >
          <label>
            Today's note (markdown)
            <textarea rows={14} value={draft} onChange={(e) => setDraft(e.target.value)} />
          </label>
          <div className="row">
            <button type="submit" disabled={save.isPending}>
              Save
            </button>
            <button type="button" className="link" onClick={() => setEditing(false)}>
              Cancel
            </button>
          </div>
        </form>
      ) : note.data && note.data.exists ? (
        <>
          <MarkdownText text={note.data.content} />
          <p className="muted">Last changed {fmtTime(note.data.last_modified)}</p>
        </>
      ) : (
        note.data && <Empty>No note for this day.</Empty>
      )}
      <h2>History</h2>
      <ErrorView error={history.error} />
      <ul className="plain" aria-label="Days with a note">
        {(history.data?.history ?? []).map((h) => (
          <li key={h.date}>
            <button
              type="button"
              className="link"
              aria-current={h.date === (note.data?.date ?? "") ? "date" : undefined}
              onClick={() => {
                const next = new URLSearchParams(params);
                next.set("date", h.date);
                setParams(next);
              }}
            >
              {h.date}
            </button>{" "}
            <span className="muted">{h.size_bytes} bytes</span>
          </li>
        ))}
      </ul>
      {!today && (
        <button
          type="button"
          onClick={() => {
            const next = new URLSearchParams(params);
            next.delete("date");
            setParams(next);
          }}
        >
          Back to today
        </button>
      )}
    </section>
  );
}
