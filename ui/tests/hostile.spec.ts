import { expect, open, test } from "./fixtures";
import { HOSTILE } from "./daemon";

// Stored text is data: hostile memories, messages, labels, source names, entity names and metadata never run
// and show literally. `window.__pwned` is what every payload would set.
test("hostile content runs nowhere and shows as text", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  const dialogs: string[] = [];
  page.on("dialog", (dlg) => {
    dialogs.push(dlg.message());
    void dlg.dismiss();
  });
  const paths = [
    "/memories",
    `/memories/${encodeURIComponent(seeded.hostileId)}`,
    "/search?q=window%20pwned%20script",
    "/threads",
    "/library",
    "/labels",
    "/graph",
    "/reviews",
    "/system",
  ];
  for (const path of paths) {
    await open(page, d, path);
    await page.waitForLoadState("networkidle");
    expect(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned), path).toBeUndefined();
    // No markup from stored text: no element the payloads name exists in the page.
    expect(await page.locator("main script, main iframe, main svg[onload], main img[onerror], main [onmouseover]").count(), path).toBe(0);
  }
  await open(page, d, `/memories/${encodeURIComponent(seeded.hostileId)}`);
  const md = page.locator(".markdown");
  await expect(md).toContainText(`<script>window.__pwned = "script"</script>`);
  await expect(md).toContainText(`<img src=x onerror="window.__pwned='img'">`);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText(`<img src=x onerror="window.__pwned='title'">Hostile`);
  await expect(page.locator("ul.chips")).toContainText(`<script>window.__pwned='label'</script>`);
  await page.getByText("Metadata").click();
  await expect(page.locator("pre.metadata")).toContainText(`<img src=x onerror=\\"window.__pwned='meta'\\">`);
  // The javascript: link is rendered without its URL.
  const link = md.getByRole("link", { name: "click me" });
  expect(await link.getAttribute("href")).not.toContain("javascript");
  await link.click();
  // The thread with a hostile title and message.
  await open(page, d, "/threads");
  await page.getByRole("link", { name: `<svg onload="window.__pwned='thread'">` }).click();
  await expect(page.locator("li.message")).toContainText("<script>window.__pwned='message'</script>");
  // The source with a hostile name, and its text.
  await open(page, d, "/library");
  await page.getByRole("link", { name: "<img src=x onerror=window.__pwned=1>.md" }).click();
  await expect(page.locator("pre.source-text")).toContainText("<script>window.__pwned='h1'</script>");
  await page.waitForTimeout(300);
  expect(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned)).toBeUndefined();
  expect(dialogs).toEqual([]);
  expect(HOSTILE.length).toBeGreaterThan(4);
});
