import { useState, type FormEvent } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { call, get, post, type Space } from "../api";
import { ErrorView, Loading, useTitle } from "../ui";

/** `/ui/spaces`: create, rename, aliases, sharing, and moving every memory of one space into another. */
export function SpacesView() {
  useTitle("Spaces");
  const qc = useQueryClient();
  const spaces = useQuery({ queryKey: ["spaces"], queryFn: () => get<{ spaces: Space[] }>("/spaces") });
  const [name, setName] = useState("");
  const refresh = () => void qc.invalidateQueries({ queryKey: ["spaces"] });
  const create = useMutation({
    mutationFn: () => post("/spaces", { name }),
    onSuccess: () => {
      setName("");
      refresh();
    },
  });
  function submit(e: FormEvent) {
    e.preventDefault();
    create.mutate();
  }
  return (
    <section aria-labelledby="spaces-title">
      <h1 id="spaces-title">Spaces</h1>
      <form className="row" onSubmit={submit}>
        <label>
          New space <input required value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <button type="submit">Create</button>
      </form>
      <ErrorView error={create.error ?? spaces.error} />
      {spaces.isPending && <Loading />}
      {(spaces.data?.spaces ?? []).map((s) => (
        <SpaceCard key={s.id} space={s} all={spaces.data?.spaces ?? []} onChanged={refresh} />
      ))}
    </section>
  );
}

function SpaceCard({ space, all, onChanged }: { space: Space; all: Space[]; onChanged: () => void }) {
  const qc = useQueryClient();
  const [name, setName] = useState(space.name);
  const [aliases, setAliases] = useState(space.aliases.join(", "));
  const [shared, setShared] = useState<string[]>(space.sharedSpaceIds);
  const [target, setTarget] = useState("");
  const save = useMutation({
    mutationFn: () =>
      call("PATCH", `/spaces/${encodeURIComponent(space.id)}`, {
        body: {
          name,
          aliases: aliases.split(",").map((a) => a.trim()).filter(Boolean),
          sharedSpaceIds: shared,
        },
      }),
    onSuccess: onChanged,
  });
  const selection = { mode: "space", source_space_id: space.id };
  const preview = useMutation({
    mutationFn: () => post<{ count: number; message: string }>("/memories/bulk/move/preview", { selection, target_space_id: target }),
  });
  const move = useMutation({
    mutationFn: () => post<{ moved_count: number; message: string }>("/memories/bulk/move", { selection, target_space_id: target }),
    onSuccess: () => {
      preview.reset();
      onChanged();
      void qc.invalidateQueries({ queryKey: ["memories"] });
    },
  });
  const others = all.filter((o) => o.id !== space.id);
  return (
    <article className="card" aria-labelledby={`space-${space.id}`}>
      <h2 id={`space-${space.id}`}>
        {space.name} <code>{space.id}</code>
      </h2>
      <p className="muted">
        {space.usage.memories} memories · {space.usage.threads} threads · {space.usage.sources} sources
      </p>
      <form
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          save.mutate();
        }}
      >
        <label>
          Name <input value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <label>
          Aliases <input value={aliases} onChange={(e) => setAliases(e.target.value)} />
        </label>
        <fieldset className="inline">
          <legend>Shares with</legend>
          {others.map((o) => (
            <label key={o.id} className="inline">
              <input
                type="checkbox"
                checked={shared.includes(o.id)}
                onChange={(e) => setShared(e.target.checked ? [...shared, o.id] : shared.filter((x) => x !== o.id))}
              />
              {o.name}
            </label>
          ))}
        </fieldset>
        <button type="submit">Save</button>
      </form>
      <ErrorView error={save.error} />
      {others.length > 0 && (
        <div className="row">
          <label>
            Move every memory to{" "}
            <select aria-label={`Move every memory of ${space.name} to`} value={target} onChange={(e) => { setTarget(e.target.value); preview.reset(); }}>
              <option value="">choose a space</option>
              {others.map((o) => (
                <option key={o.id} value={o.id}>
                  {o.name}
                </option>
              ))}
            </select>
          </label>
          <button type="button" disabled={!target} onClick={() => preview.mutate()}>
            Preview
          </button>
          <button type="button" disabled={!preview.data || move.isPending} onClick={() => move.mutate()}>
            Move
          </button>
        </div>
      )}
      {preview.data && <p role="status">{preview.data.message}</p>}
      {move.data && <p role="status">{move.data.message}</p>}
      <ErrorView error={preview.error ?? move.error} />
    </article>
  );
}
