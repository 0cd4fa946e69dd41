import fs from 'node:fs';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files that run real processes (the README walk-throughs, `liveline` processes, Chromium) start first.
 * They take 30 s to a few minutes each; started last (vitest orders files it has no timings for by
 * size, and a fresh clone has none), one of them alone could add minutes after the others have ended.
 */
class LongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]) {
    const rank = (file: TestSpecification) => {
      const text = fs.readFileSync(file.moduleId, 'utf8');
      if (text.includes('helpers/readme.ts')) return 0;
      if (file.moduleId.includes('/test/browser/') || text.includes('helpers/process.ts')) return 1;
      return 2;
    };
    const ranks = new Map(files.map((file) => [file, rank(file)]));
    const base = await super.sort(files);
    const order = new Map(base.map((file, i) => [file, i]));
    return base.sort(
      (a, b) => (ranks.get(a) ?? 2) - (ranks.get(b) ?? 2) || (order.get(a) ?? 0) - (order.get(b) ?? 0),
    );
  }
}

export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    // A file whose suites all need PostgreSQL (`backends.filter(…)`) holds no test without DATABASE_URL:
    // that is a pass on a newcomer's machine, not an error. CI cannot drop them: with CI set and no
    // DATABASE_URL the helpers throw (test/helpers/server.ts), and .ci/run checks the PostgreSQL pass ran.
    passWithNoTests: true,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Most tests wait (on real processes, sockets, databases) rather than compute: more files at once
    // than cores. Vitest's default on a 2-core machine would be one file at a time.
    maxWorkers: 3,
    // CI retries a failed test once: a CI machine can be several times slower than a developer's, and
    // the suites that run real processes under load (SIGKILL, drain, flood) have then failed there
    // without a trace in the kept end of the log. A test that passes only on its retry is not hidden:
    // vitest marks it "(retry x1)" and .ci/run lists it at the end of its output. A broken feature
    // fails both runs. Locally (`npm test` without CI) nothing is retried.
    retry: process.env.CI ? 1 : 0,
    sequence: { sequencer: LongFilesFirst },
    globalSetup: ['packages/server/test/global-setup.ts'],
  },
});
