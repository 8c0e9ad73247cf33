import { randomBytes } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, open, test } from "./fixtures";
import { engram, rest, startDaemon, stopDaemon, CSV } from "./daemon";

// One test per view: its main action through the page, checked through REST afterwards.

test("search: `/` focuses the box, results match the API, arrows and Enter open a hit", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  await open(page, d, "/search");
  // The box has autofocus: move the focus off it first. A click on the page's centre could land on the box
  // itself (it did in one CI run, and `/` was typed into the query), so click the heading.
  await page.getByRole("heading", { level: 1, name: "Search" }).click();
  await expect(page.getByRole("searchbox", { name: "Search memories" })).not.toBeFocused();
  await page.keyboard.press("/");
  await expect(page.getByRole("searchbox", { name: "Search memories" })).toBeFocused();
  await page.keyboard.type("marathon Chicago");
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(/\/ui\/search\?q=marathon\+Chicago/);
  const hits = page.locator("li.hit");
  await expect(hits.first()).toBeVisible();
  const api = await rest<{ memory: { id: string; content: string } }[]>(d, "POST", "/memories/search", { query: "marathon Chicago", limit: 20 });
  await expect(hits).toHaveCount(api.length);
  await expect(hits.first().locator(".content")).toHaveText(api[0].memory.content);
  await expect(hits.first().locator("mark").first()).toBeVisible();
  await expect(hits.first().locator(".reason")).toContainText("keyword match");
  await page.getByRole("searchbox", { name: "Search memories" }).press("ArrowDown");
  await page.keyboard.press("ArrowDown");
  await expect(hits.nth(1)).toBeFocused();
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(new RegExp(`/ui/memories/${encodeURIComponent(api[1].memory.id).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
  await page.goBack();
  await expect(page).toHaveURL(/q=marathon/);
  // The box is bound to the URL (`context=1`); the router applies the change in a transition, so wait for it.
  await page.getByLabel("Show the exchange around each hit").click();
  await expect(page.getByLabel("Show the exchange around each hit")).toBeChecked();
  await expect(page).toHaveURL(/context=1/);
  await expect(page.locator("ol.context").first()).toBeVisible();
});

test("memories: add a memory, edit its title, label it, archive it", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  await open(page, d, "/memories");
  await page.getByRole("button", { name: "Add a memory" }).click();
  const form = page.getByRole("form", { name: "Add a memory" });
  await form.getByLabel("Content (markdown)").fill("Prefers **oolong** tea in the afternoon.");
  await form.getByLabel("Labels (comma-separated)").fill("tea, habits");
  await form.getByRole("button", { name: "Save memory" }).click();
  await expect(page).toHaveURL(/\/ui\/memories\/[^/]+$/);
  const id = decodeURIComponent(page.url().split("/memories/")[1]);
  await expect(page.locator(".markdown strong")).toHaveText("oolong");
  await page.getByRole("button", { name: "Edit" }).click();
  await page.getByRole("form", { name: "Edit memory" }).getByLabel("Title").fill("Afternoon tea");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Afternoon tea");
  let m = await rest<{ title: string; labels: string[]; state: string }>(d, "GET", `/memories/${encodeURIComponent(id)}`);
  expect(m.title).toBe("Afternoon tea");
  expect(m.labels.sort()).toEqual(["habits", "tea"]);
  await page.getByLabel("Add a label").fill("drinks");
  await page.getByRole("button", { name: "Add", exact: true }).click();
  await expect(page.locator("ul.chips")).toContainText("drinks");
  await page.getByRole("button", { name: "Remove label habits" }).click();
  await expect(page.locator("ul.chips")).not.toContainText("habits");
  await page.getByRole("button", { name: "Archive" }).click();
  await page.getByRole("button", { name: "Archive this memory?" }).click();
  await expect(page.locator("dl.facts")).toContainText("archived");
  m = await rest(d, "GET", `/memories/${encodeURIComponent(id)}`);
  expect(m.state).toBe("archived");
  expect(m.labels.sort()).toEqual(["drinks", "tea"]);
});

test("memories: an expiry date takes a memory out of the list; it stays readable and the date can be cleared", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  const made = await rest<{ id?: string; memory?: { id: string } }>(d, "POST", "/memories", {
    content: "Parking permit for the old office on Elm Street",
    title: "Old parking permit",
  });
  const id = made.id ?? made.memory?.id ?? "";
  const path = `/memories/${encodeURIComponent(id)}`;
  await open(page, d, path);
  await expect(page.locator("dl.facts")).toContainText("never");
  await page.getByRole("button", { name: "Edit" }).click();
  await page.getByRole("form", { name: "Edit memory" }).getByLabel("Expires on (UTC date; empty: never)").fill("2020-01-31");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(page.locator("dl.facts")).toContainText("(expired: out of search and listings)");
  let m = await rest<{ expires_at: string | null; expired: boolean }>(d, "GET", path);
  expect(m.expires_at).toMatch(/^2020-01-31T00:00:00(\.000)?Z$/);
  expect(m.expired).toBe(true);
  // Out of the list, and back in it with "Include expired", marked.
  await open(page, d, "/memories");
  await expect(page.locator("table.list")).toBeVisible();
  await expect(page.locator("table.list")).not.toContainText("Old parking permit");
  // The box is bound to the URL (`expired=1`); the router applies the change in a transition, so wait for it.
  await page.getByLabel("Include expired").click();
  await expect(page.getByLabel("Include expired")).toBeChecked();
  await expect(page).toHaveURL(/expired=1/);
  const row = page.locator("table.list tbody tr", { hasText: "Old parking permit" });
  await expect(row.locator(".chip")).toHaveText("expired");
  // Clearing the date brings it back.
  await open(page, d, path);
  await page.getByRole("button", { name: "Edit" }).click();
  await expect(page.getByLabel("Expires on (UTC date; empty: never)")).toHaveValue("2020-01-31");
  await page.getByLabel("Expires on (UTC date; empty: never)").fill("");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(page.locator("dl.facts")).toContainText("never");
  m = await rest(d, "GET", path);
  expect(m.expires_at).toBeNull();
  expect(m.expired).toBe(false);
});

test("memories: the list pages, sorts and follows writes made elsewhere", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  await open(page, d, "/memories?order=importance");
  const api = await rest<{ memories: { title: string; content: string }[]; pagination: { total: number } }>(d, "GET", "/memories?order_by=importance&limit=50");
  await expect(page.locator("table.list tbody tr")).toHaveCount(Math.min(50, api.pagination.total));
  await expect(page.locator(".pager")).toContainText(`of ${api.pagination.total}`);
  // An agent writes while the page is open: the list shows it without a reload (polling, 5 s).
  await page.goto(`${d.url}/ui/memories`);
  await expect(page.locator("table.list")).toBeVisible();
  await rest(d, "POST", "/memories", { content: "Written by an agent while the console was open", title: "Agent note" });
  await expect(page.locator("table.list")).toContainText("Agent note", { timeout: 12_000 });
});

test("memories: a 422 shows the field's message, not a blank page", async ({ signedIn: page, seeded }) => {
  await open(page, seeded.daemon, "/memories");
  await page.getByRole("button", { name: "Add a memory" }).click();
  const form = page.getByRole("form", { name: "Add a memory" });
  await form.getByLabel("Content (markdown)").fill("Importance out of range");
  await form.getByLabel("Importance (0 to 1)").evaluate((el: HTMLInputElement) => {
    el.removeAttribute("max");
  });
  await form.getByLabel("Importance (0 to 1)").fill("7");
  await form.getByRole("button", { name: "Save memory" }).click();
  await expect(page.getByRole("alert")).toContainText("importance");
});

test("threads: import a chat file, see its messages and memories, delete it", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  await open(page, d, "/threads");
  await page.getByLabel(/Import a chat file/).setInputFiles({
    name: "Kyoto trip.md",
    mimeType: "text/markdown",
    buffer: Buffer.from("User: We booked a ryokan in Kyoto for April.\nAssistant: Lovely, April is cherry blossom season.\n"),
  });
  // The thread list may show its own "Loading…" status while the import reports: read the import's.
  await expect(page.getByRole("status").filter({ hasText: "Imported" })).toContainText("Imported 1 thread");
  await page.getByRole("link", { name: "Kyoto trip" }).click();
  await expect(page.locator("li.message")).toHaveCount(2);
  const id = decodeURIComponent(page.url().split("/threads/")[1]);
  const t = await rest<{ messages: { content: string }[] }>(d, "GET", `/threads/${encodeURIComponent(id)}`);
  expect(t.messages[0].content).toContain("ryokan");
  await expect(page.locator(".extracted a").first()).toBeVisible();
  await page.getByRole("button", { name: "Delete thread" }).click();
  await page.getByRole("button", { name: "Delete it and its messages?" }).click();
  await expect(page).toHaveURL(/\/ui\/threads$/);
  const gone = await fetch(`${d.url}/threads/${encodeURIComponent(id)}`, { headers: { Authorization: `Bearer ${d.key}` } });
  expect(gone.status).toBe(404);
});

test("graph: draws every entity the API returns, finds one, filters a community", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  const g = await rest<{ nodes: { label: string; metadata: { community_id: number | null } }[]; edges: unknown[] }>(d, "GET", "/library/graph");
  expect(g.nodes.length).toBeGreaterThan(5);
  await open(page, d, "/graph");
  const canvas = page.locator(".sigma");
  await expect(canvas).toHaveAttribute("data-drawn-ms", /\d/);
  await expect(canvas).toHaveAttribute("data-nodes", String(g.nodes.length));
  await expect(canvas).toHaveAttribute("data-edges", String(g.edges.length));
  await page.getByLabel("Find an entity").fill("Boston");
  await page.getByRole("button", { name: "Find" }).click();
  await expect(page.getByRole("button", { name: "Clear focus" })).toBeVisible();
  // The keyboard: the found entity's page opens with Enter on the graph.
  await page.locator(".sigma").focus();
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("+");
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(/\/ui\/library\/wiki\/entity\/ent_/);
  await expect(page.locator(".markdown h1")).toContainText("Boston");
  await page.goBack();
  await expect(canvas).toHaveAttribute("data-drawn-ms", /\d/);
  const c = g.nodes.find((n) => n.metadata.community_id !== null)?.metadata.community_id;
  expect(c).toBeDefined();
  await page.getByLabel("Community").selectOption(String(c));
  await expect(page).toHaveURL(new RegExp(`community=${c}`));
});

test("library: upload a CSV and read its column table; the PDF's text is there", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  await open(page, d, "/library");
  await page.getByLabel(/Upload a file/).setInputFiles({ name: "prices.csv", mimeType: "text/csv", buffer: Buffer.from("item,price\ntea,3.5\ncoffee,4.5\n") });
  await expect(page).toHaveURL(/\/ui\/library\/sources\//);
  const table = page.getByRole("table", { name: /Column statistics/ });
  await expect(table).toContainText("price");
  await expect(table.getByRole("row", { name: /price/ })).toContainText("4");
  const id = decodeURIComponent(page.url().split("/sources/")[1]);
  const a = await rest<{ sheets: { columns: { name: string; mean: number }[] }[] }>(d, "GET", `/sources/${encodeURIComponent(id)}/analysis`);
  expect(a.sheets[0].columns.find((c) => c.name === "price")?.mean).toBe(4);
  await expect(table.getByRole("row", { name: /price/ })).toContainText("4");
  await open(page, d, `/library/sources/${encodeURIComponent(seeded.pdfId)}`);
  await expect(page.locator("pre.source-text")).toContainText("lighthouse keeper");
  expect(CSV).toContain("Lisbon");
});

test("reviews: preview then apply keeps the newer memory", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  await open(page, d, "/reviews");
  const card = page.locator("article.review").first();
  await card.getByLabel("Resolution").selectOption("keep_newer_as_latest");
  await card.getByRole("button", { name: "Preview" }).click();
  await expect(card.getByRole("status")).toContainText("superseded");
  await card.getByRole("button", { name: "Apply" }).click();
  await expect(page.getByText("Nothing to review.")).toBeVisible();
  const ev = await rest<{ events: { id: string; resolved: boolean; older_memory: { id: string } }[] }>(d, "GET", "/agent/feed/events?review_only=true&unresolved_only=false");
  const done = ev.events.find((e) => e.id === seeded.reviewId);
  expect(done?.resolved).toBe(true);
  const older = await rest<{ state: string }>(d, "GET", `/memories/${encodeURIComponent(done!.older_memory.id)}`);
  expect(older.state).toBe("superseded");
});

test("labels: merge with a preview, then reverse it", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  await rest(d, "POST", "/memories", { content: "Bought hiking boots", labels: ["outdoors"] });
  await rest(d, "POST", "/memories", { content: "Mapped a trail", labels: ["hiking"] });
  await open(page, d, "/labels");
  await page.getByRole("combobox", { name: "Label to merge", exact: true }).selectOption({ label: "hiking" });
  await page.getByRole("combobox", { name: "Label to merge into" }).selectOption({ label: "outdoors" });
  await page.getByRole("button", { name: "Preview" }).click();
  await expect(page.getByRole("status")).toContainText("merge 'hiking' into 'outdoors'");
  await page.getByRole("button", { name: "Merge", exact: true }).click();
  const history = page.getByRole("list", { name: "Merge history" });
  await expect(history).toContainText("hiking → outdoors");
  let merges = await rest<{ merges: { merge_id: string; reversed_at: string | null }[] }>(d, "GET", "/labels/merges");
  expect(merges.merges[0].reversed_at).toBeNull();
  await history.getByRole("button", { name: "Reverse" }).click();
  await history.getByRole("button", { name: "Reverse this merge?" }).click();
  await expect(history).toContainText("reversed");
  merges = await rest(d, "GET", "/labels/merges");
  expect(merges.merges[0].reversed_at).not.toBeNull();
  await page.getByRole("button", { name: "Dry run" }).click();
  await expect(page.getByRole("list", { name: "Consolidation plan" })).toBeVisible();
});

test("spaces: create one, and the switcher scopes the views", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  await open(page, d, "/spaces");
  await page.getByLabel("New space").fill("Work Notes");
  await page.getByRole("button", { name: "Create" }).click();
  await expect(page.getByRole("heading", { name: /Work Notes/ })).toBeVisible();
  const s = await rest<{ spaces: { id: string }[] }>(d, "GET", "/spaces");
  expect(s.spaces.map((x) => x.id)).toContain("work-notes");
  await rest(d, "POST", "/memories", { content: "Quarterly planning is on Tuesday", space_id: "work-notes" });
  await page.getByRole("link", { name: "Memories" }).click();
  await expect(page.getByRole("heading", { name: "Memories" })).toBeVisible();
  await page.getByRole("combobox", { name: "Space", exact: true }).selectOption("work-notes");
  await expect(page).toHaveURL(/space=work-notes/);
  await expect(page.locator("table.list tbody tr")).toHaveCount(1);
  await expect(page.locator("table.list")).toContainText("Quarterly planning");
  // Bulk move: every memory of work-notes into a new space, previewed first.
  await rest(d, "POST", "/spaces", { name: "Archive Box" });
  await page.getByRole("link", { name: "Spaces" }).click();
  await expect(page.getByRole("heading", { name: "Spaces", level: 1 })).toBeVisible();
  const card = page.getByRole("article", { name: /Work Notes/ });
  await card.getByRole("combobox", { name: "Move every memory of Work Notes to" }).selectOption("archive-box");
  await card.getByRole("button", { name: "Preview" }).click();
  await expect(card.getByRole("status")).toContainText("1");
  await card.getByRole("button", { name: "Move" }).click();
  await expect(card.getByRole("status").last()).toContainText("moved");
  const moved = await rest<{ memories: { content: string }[] }>(d, "GET", "/memories?space_id=archive-box");
  expect(moved.memories.map((m) => m.content)).toEqual(["Quarterly planning is on Tuesday"]);
});

test("working memory: edit today's note", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  await open(page, d, "/working-memory");
  await page.getByRole("button", { name: "Edit" }).click();
  await page.getByLabel("Today's note (markdown)").fill("# Focus\n- finish the console tests");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(page.locator(".markdown h1")).toHaveText("Focus");
  const wm = await rest<{ content: string }>(d, "GET", "/agent/working-memory");
  expect(wm.content).toBe("# Focus\n- finish the console tests");
});

test("system: health and stats as the API reports them; export and checkpoint", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  await open(page, d, "/system");
  const stats = await rest<{ memory_count: number }>(d, "GET", "/stats?space_id=default");
  await expect(page.locator("dl.facts").nth(1)).toContainText(stats.memory_count.toLocaleString("en-US"));
  await page.getByRole("button", { name: "Export everything" }).click();
  await expect(page.getByRole("status").first()).toContainText("exported to");
  await page.getByRole("button", { name: "Checkpoint" }).click();
  await expect(page.getByText(/checkpoint at generation/)).toBeVisible();
});

test("system: an encrypted store says so, and its export is sealed", async ({ page }, info) => {
  const keyDir = mkdtempSync(join(tmpdir(), "engram-ui-key-"));
  const keyFile = join(keyDir, "store.key");
  writeFileSync(keyFile, randomBytes(32).toString("hex") + "\n", { mode: 0o600 });
  const d = await startDaemon(["--key-file", keyFile]);
  try {
    await rest(d, "POST", "/memories", { content: "A note kept encrypted at rest" });
    const r = await page.request.post(`${d.url}/ui/session`, { data: { key: d.key } });
    expect(r.status()).toBe(204);
    await open(page, d, "/system");
    const facts = page.locator("dl.facts").first();
    // The cipher of a new store is the fastest on the machine's CPU (XAES-256-GCM with AES instructions).
    await expect(facts).toContainText(
      /Encrypted \((xaes-256-gcm|xchacha20-poly1305)\), opened with its key file; key slots: key file/,
    );
    await page.getByRole("button", { name: "Export everything" }).click();
    await expect(page.getByRole("status").first()).toContainText(".zip.age");
    await expect(page.getByRole("status").first()).toContainText("sealed to this store's key");
    mkdirSync("../target/ui-screenshots", { recursive: true });
    await page.screenshot({ path: `../target/ui-screenshots/system-encrypted-${info.project.name}.png` });
  } finally {
    await stopDaemon(d);
    rmSync(keyDir, { recursive: true, force: true });
  }
});

test("sync: the other devices, what came from each, a segment refused from outside the group, a removed device", async ({ page }, info) => {
  const tmp = (name: string) => mkdtempSync(join(tmpdir(), `engram-ui-sync-${name}-`));
  const [folder, dirA, dirB, dirC, folderC, dirE] = ["folder", "a", "b", "c", "folder-c", "e"].map(tmp);
  // a starts the group, b and e join it; c belongs to another group, and its files are copied into a's folder.
  const code = /engram-sync-1-[0-9a-f]+/.exec(engram(["sync", "init", "--folder", folder, "--data-dir", dirA]))![0];
  engram(["sync", "join", "--folder", folder, "--code", code, "--data-dir", dirB]);
  engram(["sync", "join", "--folder", folder, "--code", code, "--data-dir", dirE]);
  for (const dir of [dirA, dirB, dirE]) engram(["sync", "now", "--data-dir", dir]);
  engram(["sync", "init", "--folder", folderC, "--data-dir", dirC]);
  engram(["sync", "now", "--data-dir", dirC]);
  for (const dev of readdirSync(folderC)) cpSync(join(folderC, dev), join(folder, dev), { recursive: true });
  // e is lost: a removes it, and the group key rotates.
  const eId = (JSON.parse(engram(["sync", "status", "--json", "--data-dir", dirE])) as { device_id: string }).device_id;
  expect(engram(["sync", "remove", eId, "--data-dir", dirA])).toContain("the group key was rotated (epoch 1)");
  const b = await startDaemon(["--sync"], dirB);
  let a: Awaited<ReturnType<typeof startDaemon>> | undefined;
  try {
    for (const content of ["The boiler service is due in October", "Mia's school starts at 8:15", "The spare key is with Jonas"]) {
      await rest(b, "POST", "/memories", { content });
    }
    const bId = (await rest<{ device_id: string }>(b, "GET", "/sync/status")).device_id;
    a = await startDaemon(["--sync"], dirA);
    const d = a;
    // a's worker applies b's segments and refuses c's.
    type Peer = { device_id: string; applied: number; error: string | null };
    await expect
      .poll(async () => (await rest<{ peers: Peer[] }>(d, "GET", "/sync/status")).peers.find((p) => p.device_id === bId)?.applied ?? 0, {
        timeout: 30_000,
      })
      .toBeGreaterThanOrEqual(3);
    const found = await rest<{ memory: { content: string } }[]>(d, "POST", "/memories/search", { query: "spare key Jonas", limit: 3 });
    expect(found[0].memory.content).toBe("The spare key is with Jonas");
    expect((await page.request.post(`${d.url}/ui/session`, { data: { key: d.key } })).status()).toBe(204);
    await open(page, d, "/sync");
    const rows = page.getByRole("table", { name: "Devices" }).locator("tbody tr");
    await expect(rows).toHaveCount(3);
    await expect(rows.filter({ hasText: eId.slice(0, 8) })).toContainText("removed from the group");
    await expect(page.locator("dl.facts")).toContainText("rotated 1 time");
    const rowB = rows.filter({ hasText: bId.slice(0, 8) });
    await expect(rowB).toContainText("up to date");
    const status = await rest<{ peers: Peer[]; pending_changes: number }>(d, "GET", "/sync/status");
    const applied = status.peers.find((p) => p.device_id === bId)!.applied;
    await expect(rowB).toContainText(applied.toLocaleString("en-US"));
    const rowC = rows.filter({ hasNotText: bId.slice(0, 8) }).filter({ hasNotText: eId.slice(0, 8) });
    await expect(rowC.getByRole("alert")).toContainText("refused");
    await expect(page.locator("dl.facts")).toContainText(folder);
    // The removed device has no Remove button; b has, and removing it (a click, then a second to confirm)
    // shows the new pairing code, rotates the key once more and marks b removed.
    await expect(rows.filter({ hasText: eId.slice(0, 8) }).getByRole("button")).toHaveCount(0);
    mkdirSync("../target/ui-screenshots", { recursive: true });
    await page.screenshot({ path: `../target/ui-screenshots/sync-${info.project.name}.png`, fullPage: true });
    await rowB.getByRole("button", { name: "Remove" }).click();
    await rowB.getByRole("button", { name: "Remove it for good?" }).click();
    await expect(page.getByRole("status")).toContainText(/engram-sync-2-2-[0-9a-f]{64}/);
    await expect(rowB).toContainText("removed from the group");
    await expect(page.locator("dl.facts")).toContainText("rotated 2 times");
    const after = await rest<{ key_epoch: number; removed: Record<string, number> }>(d, "GET", "/sync/status");
    expect(after.key_epoch).toBe(2);
    expect(Object.keys(after.removed).sort()).toEqual([bId, eId].sort());
    await page.screenshot({ path: `../target/ui-screenshots/sync-removed-${info.project.name}.png`, fullPage: true });
  } finally {
    await stopDaemon(b);
    if (a) await stopDaemon(a);
    for (const dir of [folder, dirC, folderC, dirE]) rmSync(dir, { recursive: true, force: true });
  }
});

test("a daemon that went away shows a reconnect banner", async ({ page }) => {
  const d = await startDaemon();
  try {
    await page.request.post(`${d.url}/ui/session`, { data: { key: d.key } });
    await page.goto(`${d.url}/ui/memories`);
    await expect(page.getByRole("heading", { name: "Memories" })).toBeVisible();
    d.proc.kill("SIGKILL");
    await expect(page.getByRole("alert")).toContainText("Reconnecting", { timeout: 15_000 });
  } finally {
    await stopDaemon(d).catch(() => undefined);
  }
});
