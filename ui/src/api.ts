// The console's one way to the daemon: same-origin fetches of the public REST routes, authenticated by the
// HttpOnly session cookie (the API key never reaches script-readable storage).

/** One entry of a 422's `detail` list (the interface's validation shape). */
export interface FieldError {
  loc: (string | number)[];
  msg: string;
  type?: string;
}

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

// Shapes of the routes the console reads (the fields it uses; the daemon sends more).

export interface Memory {
  id: string;
  title: string;
  content: string;
  importance: number;
  confidence: number;
  unit_type: string;
  state: string;
  is_latest: boolean;
  version: number;
  is_favorite: boolean;
  labels: string[];
  label_ids: string[];
  space_id: string;
  created_at: string;
  updated_at: string;
  event_start: string | null;
  event_end: string | null;
  /** When the memory expires (RFC 3339), or null: it then leaves search and listings, readable by id. */
  expires_at: string | null;
  /** `expires_at` has passed. */
  expired: boolean;
  pagerank_score: number;
  source: string;
  source_thread_id: string | null;
  metadata: Record<string, unknown>;
}

export interface Pagination {
  limit: number;
  offset: number;
  total: number;
  has_more: boolean;
}

export interface ContextItem {
  kind: string;
  index: number;
  role?: string;
  content: string;
  is_hit: boolean;
}

export interface Hit {
  memory: Memory;
  similarity_score: number;
  relevance_reason: string;
  context?: ContextItem[];
}

export interface Label {
  id: string;
  name: string;
  color: string;
  description: string;
  usage_count: number;
}

export interface Space {
  id: string;
  name: string;
  aliases: string[];
  description: string;
  sharedSpaceIds: string[];
  is_default: boolean;
  usage: { memories: number; threads: number; sources: number };
}

export interface Thread {
  id: string;
  title: string;
  source: string;
  message_count: number;
  created_at: string;
  updated_at: string;
  summary: string;
  is_favorite: boolean;
}

export interface Message {
  id: string;
  role: string;
  content: string;
  order_index: number;
  timestamp: string;
}

export interface ReviewSide {
  id: string;
  title: string;
  content: string;
  state: string;
  created_at: string;
}

export interface ReviewEvent {
  id: string;
  title: string;
  kind: string;
  created_at: string;
  older_memory: ReviewSide;
  newer_memory: ReviewSide;
  signals: string[];
  shared_entities: string[];
  resolved: boolean;
  resolution: unknown;
  allowed_actions: string[];
}

export interface Source {
  id: string;
  original_name: string;
  source_type: string;
  mime_type?: string;
  size_bytes?: number;
  created_at: string;
  lifecycle_state?: string;
  metadata?: Record<string, unknown>;
  sections?: unknown;
}
