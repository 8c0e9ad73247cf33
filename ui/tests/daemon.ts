// A real daemon for the browser tests: `engram serve` on a free loopback port with a fresh data directory,
// seeded through the REST API with generated conversations, a PDF, a CSV, a timeline review event and
// hostile content. Nothing comes from ../shared.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export interface Daemon {
  url: string;
  key: string;
  dataDir: string;
  /** The one-time sign-in path the daemon printed (`/ui/#token=...`). */
  signInPath: string;
  proc: ChildProcess;
}

export const ENGRAM_BIN = process.env.ENGRAM_BIN ?? resolve(import.meta.dirname, "../../target/debug/engram");

/** Starts `engram serve` (on `dataDir`, else a fresh one) and resolves once it printed its address and sign-in
 * path. */
export async function startDaemon(extraArgs: string[] = [], dataDir = mkdtempSync(join(tmpdir(), "engram-ui-"))): Promise<Daemon> {
  const proc = spawn(
    ENGRAM_BIN,
    ["serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--embedding-model", "builtin", ...extraArgs],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ENGRAM_LOG: "warn" } },
  );
  let out = "";
  const ready = await new Promise<{ url: string; signIn: string }>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`daemon did not start:\n${out}`)), 60_000);
    proc.stdout!.on("data", (b: Buffer) => {
      out += b.toString();
      const url = /engram listening on (http:\/\/\S+)/.exec(out)?.[1];
      const signIn = /console: http:\/\/\S+?(\/ui\/#token=[0-9a-f]+)/.exec(out)?.[1];
      if (url && (signIn || extraArgs.includes("--no-console"))) {
        clearTimeout(timer);
        ok({ url, signIn: signIn ?? "" });
      }
    });
    proc.stderr!.on("data", (b: Buffer) => (out += b.toString()));
    proc.on("exit", (code) => fail(new Error(`daemon exited ${code}:\n${out}`)));
  });
  const key = readFileSync(join(dataDir, "api-key"), "utf8").trim();
  return { url: ready.url, key, dataDir, signInPath: ready.signIn, proc };
}

export async function stopDaemon(d: Daemon) {
  if (d.proc.exitCode === null && d.proc.signalCode === null) {
    const exited = new Promise((r) => d.proc.once("exit", r));
    d.proc.kill("SIGTERM");
    await exited;
  }
  rmSync(d.dataDir, { recursive: true, force: true });
}

/** Calls the daemon's REST API with the key; throws on a non-2xx answer. */
export async function rest<T = unknown>(d: Daemon, method: string, path: string, body?: unknown): Promise<T> {
  const resp = await fetch(d.url + path, {
    method,
    headers: { Authorization: `Bearer ${d.key}`, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  if (!resp.ok) throw new Error(`${method} ${path}: ${resp.status} ${text}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

/** A two-page PDF written by hand (objects and a cross-reference table with byte offsets). */
export function tinyPdf(pages: string[], title: string): Buffer {
  const objs = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    `<< /Type /Pages /Kids [${pages.map((_, i) => `${4 + 2 * i} 0 R`).join(" ")}] /Count ${pages.length} >>`,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
  ];
  pages.forEach((text, i) => {
    const stream = `BT /F1 12 Tf 72 720 Td (${text}) Tj ET`;
    objs.push(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> /Contents ${5 + 2 * i} 0 R >>`);
    objs.push(`<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`);
  });
  objs.push(`<< /Title (${title}) >>`);
  let out = "%PDF-1.4\n";
  const offsets: number[] = [];
  objs.forEach((o, n) => {
    offsets.push(Buffer.byteLength(out));
    out += `${n + 1} 0 obj\n${o}\nendobj\n`;
  });
  const xref = Buffer.byteLength(out);
  out += `xref\n0 ${objs.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, "0")} 00000 n \n`).join("")}`;
  out += `trailer\n<< /Size ${objs.length + 1} /Root 1 0 R /Info ${objs.length} 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, "latin1");
}

const PEOPLE = [
  ["Caroline", "Melanie"],
  ["Jon", "Gina"],
];
const TOPICS = [
  "I went to a pottery class in Portland last weekend and made a blue bowl.",
  "We are planning a camping trip to Yosemite in August with the kids.",
  "My sister started a bakery in Boston; she sells sourdough on Saturdays.",
  "I decided to train for the Chicago marathon next October.",
  "The dance studio opened a new salsa class on Thursday evenings.",
  "I adopted a dog named Biscuit from the shelter in Denver.",
];

/** LoCoMo-like conversations: two speakers, several dated sessions each, as per-message threads. */
export async function seedConversations(d: Daemon, space = "default"): Promise<string[]> {
  const ids: string[] = [];
  for (const [a, b] of PEOPLE) {
    for (let s = 0; s < 3; s++) {
      const messages = TOPICS.slice(s, s + 4).flatMap((t, i) => [
        { role: "user", content: t, metadata: { speaker: a, timestamp: `2023-0${s + 5}-1${i}T10:00:00Z` } },
        { role: "assistant", content: `That sounds great, ${a}! How did it go?`, metadata: { speaker: b } },
      ]);
      const r = await rest<{ thread: { id: string } }>(d, "POST", "/threads", {
        title: `${a} and ${b}, session ${s + 1}`,
        messages,
        space_id: space,
        source: "locomo-like",
        metadata: { analysis: "per-message" },
      });
      ids.push(r.thread.id);
    }
  }
  return ids;
}

/** Two memories whose numbers differ and that share entities: the daemon raises a timeline review. */
export async function seedReview(d: Daemon): Promise<string> {
  await rest(d, "POST", "/memories", { content: "Maria works at Acme in Lisbon and her team has 12 engineers." });
  await rest(d, "POST", "/memories", { content: "Maria works at Acme in Lisbon and her team has 15 engineers." });
  const ev = await rest<{ events: { id: string }[] }>(d, "GET", "/agent/feed/events?review_only=true&unresolved_only=true");
  if (!ev.events[0]) throw new Error("no review event was raised");
  return ev.events[0].id;
}

/** Uploads a file through the multipart route. */
export async function upload(d: Daemon, name: string, bytes: Buffer, type: string): Promise<{ id: string }> {
  const form = new FormData();
  form.append("file", new Blob([new Uint8Array(bytes)], { type }), name);
  const resp = await fetch(`${d.url}/sources/ingest/file`, { method: "POST", headers: { Authorization: `Bearer ${d.key}` }, body: form });
  if (!resp.ok) throw new Error(`upload ${name}: ${resp.status} ${await resp.text()}`);
  return (await resp.json()) as { id: string };
}

export const CSV = "city,country,population\nLisbon,Portugal,545000\nPorto,Portugal,232000\nMadrid,Spain,3300000\n";

/** Payloads that would set `window.__pwned` if any of them ran. */
export const HOSTILE = [
  `<script>window.__pwned = "script"</script>`,
  `<img src=x onerror="window.__pwned='img'">`,
  `[click me](javascript:window.__pwned='link')`,
  `<svg onload="window.__pwned='svg'"><circle r=5 /></svg>`,
  `**bold** <div onmouseover="window.__pwned='div'">raw html in markdown</div>`,
  `<iframe srcdoc="<script>parent.__pwned='iframe'</script>"></iframe>`,
];

/** Seeds hostile text in every place the console shows stored text. Returns the hostile memory's id. */
export async function seedHostile(d: Daemon): Promise<string> {
  const content = HOSTILE.join("\n\n");
  const m = await rest<{ id?: string; memory?: { id: string } }>(d, "POST", "/memories", {
    title: `<img src=x onerror="window.__pwned='title'">Hostile`,
    content,
    labels: [`<script>window.__pwned='label'</script>`],
    metadata: { note: `<img src=x onerror="window.__pwned='meta'">` },
  });
  await rest(d, "POST", "/threads", {
    title: `<svg onload="window.__pwned='thread'">`,
    messages: [{ role: "user", content: `Hello <script>window.__pwned='message'</script> from Dr. <b>Evil</b> in <img src=x onerror="window.__pwned='m2'">Paris` }],
  });
  await upload(d, `<img src=x onerror=window.__pwned=1>.md`, Buffer.from(`# <script>window.__pwned='h1'</script>\n\n${content}\n`), "text/markdown");
  return m.id ?? m.memory?.id ?? "";
}

export function writeJson(path: string, v: unknown) {
  writeFileSync(path, JSON.stringify(v, null, 2));
}

/** Runs `engram ARGS` to its end and returns what it printed; throws when it fails. */
export function engram(args: string[]): string {
  return execFileSync(ENGRAM_BIN, args, { encoding: "utf8", env: { ...process.env, ENGRAM_LOG: "warn" } });
}
