import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { expect, test } from "./fixtures";
import { ENGRAM_BIN } from "./daemon";

test.describe("sign-in and the session cookie", () => {
  test("without a cookie the sign-in page shows and no data is served", async ({ page, seeded }) => {
    const d = seeded.daemon;
    await page.goto(`${d.url}/ui/memories`);
    await expect(page.getByLabel("API key")).toBeVisible();
    await expect(page.getByRole("table")).toHaveCount(0);
    const r = await page.request.get(`${d.url}/memories`);
    expect(r.status()).toBe(401);
    // The shell and its assets are public; they hold no data.
    const shell = await page.request.get(`${d.url}/ui/memories`);
    expect(shell.status()).toBe(200);
    expect(await shell.text()).not.toContain("Lisbon");
  });

  test("a wrong key is refused with 401 and a message", async ({ page, seeded }) => {
    const d = seeded.daemon;
    await page.goto(`${d.url}/ui/`);
    const answer = page.waitForResponse((r) => r.url().endsWith("/ui/session") && r.request().method() === "POST");
    await page.getByLabel("API key").fill("engram_wrong");
    await page.getByRole("button", { name: "Sign in" }).click();
    expect((await answer).status()).toBe(401);
    await expect(page.getByRole("alert")).toContainText("invalid api key");
  });

  test("the right key signs in; the cookie is HttpOnly and SameSite=Strict; sign-out ends it", async ({ page, seeded }) => {
    const d = seeded.daemon;
    await page.goto(`${d.url}/ui/search`);
    await page.getByLabel("API key").fill(d.key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page.getByRole("heading", { name: "Search" })).toBeVisible();
    expect(await page.evaluate(() => document.cookie)).toBe("");
    expect(await page.evaluate(() => JSON.stringify(localStorage) + JSON.stringify(sessionStorage))).not.toContain(d.key);
    const [cookie] = await page.context().cookies();
    expect(cookie.name).toBe("engram_session");
    expect(cookie.httpOnly).toBe(true);
    expect(cookie.sameSite).toBe("Strict");
    expect(cookie.path).toBe("/");
    const ok = await fetch(`${d.url}/stats`, { headers: { Cookie: `engram_session=${cookie.value}` } });
    expect(ok.status).toBe(200);
    await page.getByRole("button", { name: "Sign out" }).click();
    await expect(page.getByLabel("API key")).toBeVisible();
    const after = await fetch(`${d.url}/stats`, { headers: { Cookie: `engram_session=${cookie.value}` } });
    expect(after.status).toBe(401);
  });

  test("the one-time token signs in once and leaves the address bar", async ({ browser, seeded }) => {
    const d = seeded.daemon;
    const t = await fetch(`${d.url}/ui/tokens`, { method: "POST", headers: { Authorization: `Bearer ${d.key}` } });
    expect(t.status).toBe(201);
    const { path } = (await t.json()) as { path: string };
    const first = await browser.newContext();
    const page = await first.newPage();
    await page.goto(`${d.url}${path}`);
    await expect(page.getByRole("heading", { name: "Search" })).toBeVisible();
    expect(page.url()).not.toContain("token=");
    const second = await browser.newContext();
    const again = await second.newPage();
    await again.goto(`${d.url}${path}`);
    await expect(again.getByLabel("API key")).toBeVisible();
    await expect(again.getByRole("alert")).toContainText("invalid or used sign-in token");
    await first.close();
    await second.close();
  });

  test("`engram ui` prints a fresh sign-in URL for the running daemon", async ({ page, seeded }) => {
    const d = seeded.daemon;
    const addr = d.url.replace("http://", "");
    const url = execFileSync(ENGRAM_BIN, ["ui", "--addr", addr, "--data-dir", d.dataDir], { encoding: "utf8" }).trim();
    expect(url).toMatch(new RegExp(`^${d.url}/ui/#token=[0-9a-f]{64}$`));
    await page.goto(url);
    await expect(page.getByRole("heading", { name: "Search" })).toBeVisible();
    // A wrong key is refused by the daemon, and the command says so.
    let failed = "";
    try {
      execFileSync(ENGRAM_BIN, ["ui", "--addr", addr, "--api-key", "wrong"], { encoding: "utf8", stdio: "pipe" });
    } catch (e) {
      failed = String((e as { stderr?: string }).stderr);
    }
    expect(failed).toContain("refused the API key");
  });

  test("a cross-site form POST carrying the cookie is 403 and writes nothing", async ({ signedIn: page, seeded }) => {
    const d = seeded.daemon;
    const before = (await (await fetch(`${d.url}/stats`, { headers: { Authorization: `Bearer ${d.key}` } })).json()) as { memory_count: number };
    // Another program on this machine: a page on another port of localhost (the same site, another origin).
    const evil = createServer((_, res) => {
      res.setHeader("Content-Type", "text/html");
      res.end(`<form id=f method=POST action="${d.url.replace("127.0.0.1", "localhost")}/memories" enctype="text/plain">
        <input name='{"content":"planted by another site","x":"' value='"}'></form><script>f.submit()</script>`);
    });
    await new Promise<void>((r) => evil.listen(0, "127.0.0.1", r));
    const port = (evil.address() as AddressInfo).port;
    // Sign in on the localhost name too, so the cookie exists for the host the form targets.
    await page.request.post(`${d.url.replace("127.0.0.1", "localhost")}/ui/session`, { data: { key: d.key } });
    const answer = page.waitForResponse((r) => r.url().endsWith("/memories") && r.request().method() === "POST");
    await page.goto(`http://localhost:${port}/`);
    const resp = await answer;
    expect(resp.status()).toBe(403);
    expect(await resp.request().headerValue("cookie")).toContain("engram_session=");
    evil.close();
    const after = (await (await fetch(`${d.url}/stats`, { headers: { Authorization: `Bearer ${d.key}` } })).json()) as { memory_count: number };
    expect(after.memory_count).toBe(before.memory_count);
  });

  test("every console answer carries the security headers; hashed assets are immutable", async ({ request, seeded }) => {
    const d = seeded.daemon;
    const shell = await request.get(`${d.url}/ui/graph`);
    const csp = shell.headers()["content-security-policy"];
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).not.toContain("unsafe-eval");
    expect(shell.headers()["x-content-type-options"]).toBe("nosniff");
    const html = await shell.text();
    const asset = /src="(\/ui\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(asset).toBeTruthy();
    const js = await request.get(`${d.url}${asset}`);
    expect(js.headers()["content-type"]).toContain("javascript");
    expect(js.headers()["cache-control"]).toContain("immutable");
    expect(html).not.toMatch(/<script>(?!<)/);
  });
});
