import { defineConfig } from "vite";

// The daemon serves the bundle at /ui/ from ui/dist, embedded in the binary. Hashed file names make every
// asset cacheable forever; nothing is inlined into index.html (the console's CSP allows no inline script).
export default defineConfig({
  base: "/ui/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    chunkSizeWarningLimit: 1200,
    rolldownOptions: {
      // React Query marks modules "use client" for server-component bundlers; a browser bundle has no use for it.
      onwarn(warning, warn) {
        if (warning.code === "MODULE_LEVEL_DIRECTIVE") return;
        warn(warning);
      },
    },
  },
});
