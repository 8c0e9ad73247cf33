// The console's one way to the daemon: same-origin fetches of the public REST routes, authenticated by the
// HttpOnly session cookie (the API key never reaches script-readable storage).

import type { components } from "./schema.gen";

/** One entry of a 422's `detail` list (the interface's validation shape). */
export type FieldError = components["schemas"]["FieldError"];

/** An answer other than 2xx, with the message a person can read. */
export class ApiError extends Error {
  status: number;
  code: string;
  fields: FieldError[];
  constructor(status: number, message: string, code = "", fields: FieldError[] = []) {
    super(message);
    this.status = status;
    this.code = code;
    this.fields = fields;
  }
}

/** The daemon could not be reached at all (stopped, restarting). */
export class OfflineError extends Error {}

type Listener = (state: ConnectionState) => void;
export type ConnectionState = "online" | "offline" | "signed-out";
const listeners = new Set<Listener>();
let connection: ConnectionState = "online";

export function onConnection(l: Listener): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

export function setConnection(state: ConnectionState) {
  if (state === connection) return;
  connection = state;
  listeners.forEach((l) => l(state));
}

export type Query = Record<string, string | number | boolean | undefined | null | string[]>;

/** `path` with `query` appended (arrays repeat the key; empty values are left out). */
export function withQuery(path: string, query?: Query): string {
  if (!query) return path;
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || v === null || v === "") continue;
    if (Array.isArray(v)) v.forEach((x) => p.append(k, x));
    else p.append(k, String(v));
  }
  const s = p.toString();
  return s ? `${path}?${s}` : path;
}

/** Readable text of a 422 `detail` entry: "title: must have 1 to 255 characters". */
export function fieldText(f: FieldError): string {
  const loc = f.loc.filter((x) => x !== "body" && x !== "query" && x !== "path").join(".");
  return loc ? `${loc}: ${f.msg}` : f.msg;
}

async function errorOf(resp: Response): Promise<ApiError> {
  let body: unknown = null;
  try {
    body = await resp.json();
  } catch {
    // Not JSON: the status line is all there is.
  }
  const b = (body ?? {}) as { detail?: unknown; error_code?: string };
  if (Array.isArray(b.detail)) {
    const fields = b.detail as FieldError[];
    return new ApiError(resp.status, fields.map(fieldText).join("; ") || "invalid input", "validation_error", fields);
  }
  const msg = typeof b.detail === "string" ? b.detail : `${resp.status} ${resp.statusText}`;
  return new ApiError(resp.status, msg, b.error_code ?? "");
}

export interface CallOptions {
  query?: Query;
  body?: unknown;
  form?: FormData;
  /** Return the body as text (markdown routes). */
  text?: boolean;
  signal?: AbortSignal;
}

/** Calls a REST route; resolves with the parsed JSON (or text), rejects with ApiError or OfflineError. */
export async function call<T>(method: string, path: string, opts: CallOptions = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: opts.text ? "text/markdown, text/plain" : "application/json" };
  let body: BodyInit | undefined;
  if (opts.form) body = opts.form;
  else if (opts.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(opts.body);
  }
  let resp: Response;
  try {
    resp = await fetch(withQuery(path, opts.query), {
      method,
      headers,
      body,
      credentials: "same-origin",
      signal: opts.signal,
    });
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") throw e;
    setConnection("offline");
    throw new OfflineError("The daemon does not answer.");
  }
  if (resp.status === 401) {
    setConnection("signed-out");
    throw await errorOf(resp);
  }
  setConnection("online");
  if (!resp.ok) throw await errorOf(resp);
  if (resp.status === 204) return undefined as T;
  if (opts.text) return (await resp.text()) as T;
  return (await resp.json()) as T;
}

export const get = <T>(path: string, query?: Query) => call<T>("GET", path, { query });
export const post = <T>(path: string, body?: unknown, query?: Query) => call<T>("POST", path, { body, query });

// Shapes of the routes the console reads: the daemon's own DTOs, generated from its OpenAPI document
// (`src/schema.gen.ts`: `engram openapi > ../target/openapi.json && npm run types`; CI checks it is current).

type Schemas = components["schemas"];

export type Memory = Schemas["MemoryOut"];
export type Pagination = Schemas["Pagination"];
export type ContextItem = Schemas["ContextItem"];
export type Hit = Schemas["MemorySearchResult"];
export type Label = Schemas["Label"];
export type Space = Schemas["Space"];
export type Thread = Schemas["Thread"];
export type Message = Schemas["Message"];
export type ReviewSide = Schemas["MemoryBrief"];
export type ReviewEvent = Schemas["FeedEvent"];
export type Source = Schemas["Source"];
export type SyncStatus = Schemas["SyncStatus"];
export type RemoveReport = Schemas["RemoveReport"];
