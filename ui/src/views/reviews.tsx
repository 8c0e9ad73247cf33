import { useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useSearchParams } from "react-router";
import { post, get, type ReviewEvent, type ReviewSide } from "../api";
import { Empty, ErrorView, Loading, SpaceLink, fmtTime, useSpace, useTitle } from "../ui";

const ACTION_TEXT: Record<string, string> = {
  keep_newer_as_latest: "Keep the newer one (the older is superseded)",
  keep_older_as_latest: "Keep the older one (the newer is superseded)",
  keep_both_linked: "Keep both, linked",
  no_change_needed: "No change needed",
  dismiss: "Dismiss",
  custom_note_only: "Note only",
};

interface Preview {
  plan_id: string;
  effects: string[];
}

/** `/ui/reviews`: the timeline review queue; each event's two memories side by side, a preview, then apply. */
export function ReviewsView() {
  useTitle("Reviews");
  const space = useSpace();
  const [params, setParams] = useSearchParams();
  const showResolved = params.get("resolved") === "1";
  const events = useQuery({
    queryKey: ["reviews", space, showResolved],
    queryFn: () =>
      get<{ events: ReviewEvent[]; total: number }>("/agent/feed/events", {
        review_only: true,
        unresolved_only: !showResolved,
        space_id: space,
        limit: 50,
      }),
  });
  return (
    <section aria-labelledby="rev-title">
      <div className="row">
        <h1 id="rev-title">Reviews</h1>
        <label className="inline">
          <input
            type="checkbox"
            checked={showResolved}
            onChange={(e) => {
              const next = new URLSearchParams(params);
              if (e.target.checked) next.set("resolved", "1");
              else next.delete("resolved");
              setParams(next, { replace: true });
            }}
          />
          Show resolved events too
        </label>
      </div>
      <p className="muted">A new memory that may update or contradict an earlier one waits here for a decision.</p>
      <ErrorView error={events.error} />
      {events.isPending && <Loading />}
      {events.data && events.data.events.length === 0 && <Empty>Nothing to review.</Empty>}
      {(events.data?.events ?? []).map((ev) => (
        <ReviewCard key={ev.id} event={ev} />
      ))}
    </section>
  );
}

function Side({ title, side }: { title: string; side: ReviewSide }) {
  return (
    <div className="card">
      <h3>{title}</h3>
      <p>
        <SpaceLink to={`/memories/${encodeURIComponent(side.id)}`}>{side.title || side.id}</SpaceLink>
      </p>
      <p>{side.content}</p>
      <p className="muted">
        {side.state} · {fmtTime(side.created_at)}
      </p>
    </div>
  );
}

function ReviewCard({ event }: { event: ReviewEvent }) {
  const space = useSpace();
  const qc = useQueryClient();
  const [action, setAction] = useState(event.allowed_actions[0] ?? "dismiss");
  const [note, setNote] = useState("");
  const url = `/agent/feed/events/${encodeURIComponent(event.id)}/review`;
  const preview = useMutation({
    mutationFn: () => post<Preview>(url, { phase: "preview", action, resolution_note: note || undefined }, { space_id: space }),
  });
  const apply = useMutation({
    mutationFn: () =>
      post(url, { phase: "apply", action, plan_id: preview.data?.plan_id, resolution_note: note || undefined }, { space_id: space }),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ["reviews"] });
      void qc.invalidateQueries({ queryKey: ["memories"] });
    },
  });
  const headingId = `rev-${event.id}`;
  return (
    <article className="review" aria-labelledby={headingId}>
      <h2 id={headingId}>{event.title}</h2>
      <p className="muted">
        {event.kind} · {fmtTime(event.created_at)} · shared: {event.shared_entities.join(", ")}
      </p>
      <div className="grid2">
        <Side title="Older" side={event.older_memory} />
        <Side title="Newer" side={event.newer_memory} />
      </div>
      {event.resolved ? (
        <p role="status">Resolved.</p>
      ) : (
        <div className="row">
          <label>
            Resolution{" "}
            <select
              value={action}
              onChange={(e) => {
                setAction(e.target.value);
                preview.reset();
              }}
            >
              {event.allowed_actions.map((a) => (
                <option key={a} value={a}>
                  {ACTION_TEXT[a] ?? a}
                </option>
              ))}
            </select>
          </label>
          <label>
            Note <input value={note} onChange={(e) => setNote(e.target.value)} />
          </label>
          <button type="button" onClick={() => preview.mutate()}>
            Preview
          </button>
          <button type="button" disabled={!preview.data || apply.isPending} onClick={() => apply.mutate()}>
            Apply
          </button>
        </div>
      )}
      {preview.data && (
        <div className="card" role="status">
          <strong>What applying does:</strong>
          {preview.data.effects.length === 0 ? (
            <p>Nothing changes but the event, which is marked resolved.</p>
          ) : (
            <ul>
              {preview.data.effects.map((e, i) => (
                <li key={i}>{e}</li>
              ))}
            </ul>
          )}
        </div>
      )}
      <ErrorView error={preview.error ?? apply.error} />
    </article>
  );
}
