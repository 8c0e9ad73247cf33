import { useQuery } from "@tanstack/react-query";
import { get, type Label } from "../api";
import { useSpace } from "../ui";

export const UNIT_TYPES = ["fact", "preference", "decision", "plan", "procedure", "learning", "context", "event"];
export const STATES = ["active", "archived", "deprecated", "superseded", "all"];

/** The filters shared by search and the memories list, as they stand in the URL. */
export interface FilterState {
  label: string;
  unit_type: string;
  state: string;
  from: string;
  to: string;
}

export function readFilters(p: URLSearchParams): FilterState {
  return {
    label: p.get("label") ?? "",
    unit_type: p.get("unit_type") ?? "",
    state: p.get("state") ?? "",
    from: p.get("from") ?? "",
    to: p.get("to") ?? "",
  };
}

/** The search body's filter fields. Search covers active memories; any other state adds older versions
 * (`include_history`), the nearest the search route offers. */
export function filterQuery(f: FilterState) {
  return {
    filter_labels: f.label ? [f.label] : undefined,
    unit_type: f.unit_type || undefined,
    include_history: f.state !== "" && f.state !== "active" ? true : undefined,
    recorded_date_from: f.from || undefined,
    recorded_date_to: f.to || undefined,
  };
}

export function Filters({ value, onChange }: { value: FilterState; onChange: (f: FilterState) => void }) {
  const space = useSpace();
  const labels = useQuery({
    queryKey: ["labels", space, "names"],
    queryFn: () => get<Label[]>("/labels", { space_id: space, limit: 200, order_by: "usage_count", order_desc: true }),
  });
  const set = (k: keyof FilterState) => (e: { target: { value: string } }) => onChange({ ...value, [k]: e.target.value });
  return (
    <fieldset className="filters">
      <legend>Filters</legend>
      <label>
        Label
        <select value={value.label} onChange={set("label")}>
          <option value="">any</option>
          {(labels.data ?? []).map((l) => (
            <option key={l.id} value={l.name}>
              {l.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        Unit type
        <select value={value.unit_type} onChange={set("unit_type")}>
          <option value="">any</option>
          {UNIT_TYPES.map((u) => (
            <option key={u}>{u}</option>
          ))}
        </select>
      </label>
      <label>
        State
        <select value={value.state} onChange={set("state")}>
          <option value="">active</option>
          {STATES.filter((s) => s !== "active").map((s) => (
            <option key={s}>{s}</option>
          ))}
        </select>
      </label>
      <label>
        From
        <input type="date" value={value.from} onChange={set("from")} />
      </label>
      <label>
        To
        <input type="date" value={value.to} onChange={set("to")} />
      </label>
    </fieldset>
  );
}
