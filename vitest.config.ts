import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Most tests wait (on real processes, sockets, databases) rather than compute: more files at once
    // than cores. Vitest's default on a 2-core machine would be one file at a time.
    maxWorkers: 3,
  },
});
