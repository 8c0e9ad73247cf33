import { mkdirSync } from "node:fs";
import { expect, open, test } from "./fixtures";

const SHOTS = "../target/ui-screenshots";

// Every view at 1280x800, in the light and the dark theme (the two projects of playwright.config.ts).
test("screenshots of every view", async ({ signedIn: page, seeded }, info) => {
  mkdirSync(SHOTS, { recursive: true });
  const d = seeded.daemon;
  const views: [string, string, string?][] = [
    ["search", "/search?q=camping%20trip%20Yosemite&context=1", "li.hit"],
    ["memories", "/memories", "table"],
    ["memory", `/memories/${encodeURIComponent(seeded.hostileId)}`, ".markdown"],
    ["threads", "/threads", "table"],
    ["thread", `/threads/${encodeURIComponent(seeded.threads[0])}`, "li.message"],
    ["graph", "/graph", ".sigma[data-drawn-ms]"],
    ["library", "/library", "table"],
    ["source-csv", `/library/sources/${encodeURIComponent(seeded.csvId)}`, "caption"],
    ["reviews", "/reviews", "article.review"],
    ["labels", "/labels", "table"],
    ["spaces", "/spaces", "article.card"],
    ["working-memory", "/working-memory", "h2"],
    ["sync", "/sync", "p.empty, .empty"],
    ["system", "/system", "dl.facts"],
  ];
  for (const [name, path, ready] of views) {
    await open(page, d, path);
    if (ready) await expect(page.locator(ready).first()).toBeVisible();
    await page.screenshot({ path: `${SHOTS}/${name}-${info.project.name}.png` });
  }
});
