import { defineConfig } from "@playwright/test";
import base from "./playwright.config";

// The console's speed bench (not part of CI): `npx playwright test -c playwright.bench.config.ts`, with
// ENGRAM_BIN pointing at a release build. Figures are printed, never asserted.
export default defineConfig({
  ...base,
  testDir: "bench",
  testMatch: /.*\.bench\.ts/,
  timeout: 30 * 60_000,
  projects: [{ name: "bench", use: { colorScheme: "light" } }],
});
