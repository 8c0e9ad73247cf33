import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { expect, test } from "./fixtures";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

// axe-core on every view: no serious or critical violation. axe is injected through CDP evaluation, which
// the page's CSP does not govern (the console itself allows no inline script).
test("every view passes axe-core with no serious or critical violation", async ({ signedIn: page, seeded }) => {
  const d = seeded.daemon;
  const paths = [
    "/search?q=bakery%20Boston&context=1",
    "/memories",
    `/memories/${encodeURIComponent(seeded.hostileId)}`,
    "/threads",
    `/threads/${encodeURIComponent(seeded.threads[0])}`,
    "/graph",
    "/library",
    `/library/sources/${encodeURIComponent(seeded.csvId)}`,
    "/reviews?resolved=1",
    "/labels",
    "/spaces",
    "/working-memory",
    "/sync",
    "/system",
  ];
  const found: string[] = [];
  for (const path of paths) {
    await page.goto(`${d.url}/ui${path}`);
    await expect(page.locator("main h1").first()).toBeVisible();
    await page.waitForLoadState("networkidle");
    await page.evaluate(AXE);
    const violations = await page.evaluate(async () => {
      const axe = (window as unknown as { axe: { run: (ctx: Document, o: object) => Promise<{ violations: Violation[] }> } }).axe;
      const r = await axe.run(document, { resultTypes: ["violations"] });
      return r.violations;
    });
    for (const v of violations.filter((v) => v.impact === "serious" || v.impact === "critical")) {
      found.push(`${path}: ${v.id} (${v.impact}) ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).slice(0, 3).join(", ")}`);
    }
  }
  expect(found).toEqual([]);
  // axe really runs here: a button without a name is found.
  const planted = await page.evaluate(async () => {
    document.body.appendChild(document.createElement("button"));
    const axe = (window as unknown as { axe: { run: (ctx: Document) => Promise<{ violations: Violation[] }> } }).axe;
    return (await axe.run(document)).violations.map((v) => v.id);
  });
  expect(planted).toContain("button-name");
});

test("the sign-in page passes axe-core too, in the dark theme as well", async ({ browser, seeded }) => {
  for (const colorScheme of ["light", "dark"] as const) {
    const ctx = await browser.newContext({ colorScheme });
    const page = await ctx.newPage();
    await page.goto(`${seeded.daemon.url}/ui/`);
    await expect(page.getByLabel("API key")).toBeVisible();
    await page.evaluate(AXE);
    const violations = await page.evaluate(async () => {
      const axe = (window as unknown as { axe: { run: (ctx: Document) => Promise<{ violations: Violation[] }> } }).axe;
      return (await axe.run(document)).violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => v.id);
    });
    expect(violations, colorScheme).toEqual([]);
    await ctx.close();
  }
});
