import { defineConfig } from "@playwright/test";
import base from "./playwright.config";

// The console's speed bench (not part of CI): `npx playwright test -c playwright.bench.config.ts`, with
// ENGRAM_BIN pointing at a release build. Figures are printed, never asserted.
//
// The browser composites the page in software (`--disable-gpu-compositing`), as Chrome does on a machine whose GPU
// it cannot use; WebGL still runs on SwiftShader. BENCH_COMPOSITING=swiftshader keeps the tests' setting instead,
// where SwiftShader also composites every layer: a path only headless test browsers take, and on 2 cores it bounds
// any page that repaints a large canvas every frame (about 25 frames/s here, even with the graph drawing nothing).
// BENCH_UI_DIST=dist-dir serves the console from a fresh `vite build --outDir dist-dir` instead of the bundle
// embedded in ENGRAM_BIN (no Rust rebuild while working on the front end); BENCH_PROFILE=1 prints where the main
// thread spent its time during the in-page drag.
export default defineConfig({
  ...base,
  testDir: "bench",
  testMatch: /.*\.bench\.ts/,
  timeout: 30 * 60_000,
  projects: [
    {
      name: "bench",
      use: {
        colorScheme: "light",
        launchOptions: {
          ...base.use?.launchOptions,
          args: [...(base.use?.launchOptions?.args ?? []), ...(process.env.BENCH_COMPOSITING === "swiftshader" ? [] : ["--disable-gpu-compositing"])],
        },
      },
    },
  ],
});
