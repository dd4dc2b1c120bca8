import { defineConfig } from "vitest/config";

// Unit tests of the pure modules (state, adapter, socket, templates): no DOM, no JupyterLab.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    environment: "node",
  },
});
