import { test as base, expect, type Page } from "@playwright/test";
import { seedConversations, seedHostile, seedReview, startDaemon, stopDaemon, tinyPdf, upload, CSV, type Daemon } from "./daemon";

export interface Seeded {
  daemon: Daemon;
  threads: string[];
  reviewId: string;
  pdfId: string;
  csvId: string;
  hostileId: string;
}

/** One seeded daemon per worker; `page` signs in with the key through the console's own route. */
export const test = base.extend<{ signedIn: Page }, { seeded: Seeded }>({
  seeded: [
    async ({}, use) => {
      const daemon = await startDaemon();
      const threads = await seedConversations(daemon);
      const reviewId = await seedReview(daemon);
      const pdf = await upload(daemon, "tides.pdf", tinyPdf(["Tide tables for the outer harbour", "The lighthouse keeper logs the spring tides."], "Tide tables"), "application/pdf");
      const csv = await upload(daemon, "cities.csv", Buffer.from(CSV), "text/csv");
      const hostileId = await seedHostile(daemon);
      // The graph worker recomputes communities and PageRank 2 s after the last write.
      for (let i = 0; i < 150; i++) {
        const c = (await (await fetch(`${daemon.url}/communities`, { headers: { Authorization: `Bearer ${daemon.key}` } })).json()) as { total: number };
        if (c.total > 0) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      await use({ daemon, threads, reviewId, pdfId: pdf.id, csvId: csv.id, hostileId });
      await stopDaemon(daemon);
    },
    { scope: "worker", timeout: 120_000 },
  ],
  signedIn: async ({ page, seeded }, use) => {
    const errors: Error[] = [];
    page.on("pageerror", (e) => errors.push(e));
    const r = await page.request.post(`${seeded.daemon.url}/ui/session`, { data: { key: seeded.daemon.key } });
    expect(r.status()).toBe(204);
    await use(page);
    expect(errors, "uncaught page errors").toEqual([]);
  },
});

export { expect };

/** Opens a console path and waits until the view's heading is there. */
export async function open(page: Page, d: Daemon, path: string) {
  await page.goto(`${d.url}/ui${path}`);
  await expect(page.locator("main h1").first()).toBeVisible();
}
