// The long fuzz run (issue 10): the schema-driven fuzz of `npm test` (packages/server/test/helpers/fuzz.ts)
// round after round against one server process for FUZZ_SECONDS, a new seed each round, sampling the
// server's resident memory after every route. Fails (exit 1) on any finding — a 5xx, an error that is
// not a problem document, a stack trace, file path or SQL in an answer, a request left unanswered — or
// when memory keeps growing: the second half of the run may not add more than 10 % + 32 MiB to what
// the first half reached.
//   node --import tsx bench/fuzz.ts        # BENCH_BACKEND=sqlite|postgres, FUZZ_SECONDS (180),
//                                          # FUZZ_RUNS per route and round (30), FUZZ_SEED (random)

// @ts-expect-error a plain ES module without type declarations
import { bundle } from '../packages/server/scripts/bundle.mjs';
import { type Finding, FuzzWorld, fuzzOperations, rssOf } from '../packages/server/test/helpers/fuzz.ts';
import { fetchDocument, operationsOf } from '../packages/server/test/helpers/openapi.ts';
import { exitWithin, startProcess } from '../packages/server/test/helpers/process.ts';
import { startReceiver } from '../packages/server/test/helpers/receiver.ts';
import { freshStore } from '../packages/server/test/helpers/server.ts';

const backend = process.env.BENCH_BACKEND === 'postgres' ? 'postgres' : 'sqlite';
const seconds = Number(process.env.FUZZ_SECONDS ?? 180);
const runs = Number(process.env.FUZZ_RUNS ?? 30);
const firstSeed = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const MiB = 1024 * 1024;

// The process it starts is the bundle `npm test` builds (`liveline start`): built here too, so that a
// fresh clone can run this first and it never runs older code than the source.
await bundle();
const receiver = await startReceiver();
const store = freshStore(backend);
const adminToken = `fuzz-admin-${process.pid}-${Date.now()}`;
// `liveline start` as a child process, its log kept: an error it logs is a finding too (with its cause).
const server = await startProcess({
  ...store.env,
  LIVELINE_ADMIN_TOKEN: adminToken,
  LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
  LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
  // Every webhook URL the fuzz sends is rewritten to this machine (fuzz.ts keepLocal).
  LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
  LIVELINE_WEBHOOK_RETRY_SCHEDULE: '1,1',
});
const pid = server.child.pid as number;
const findings: Finding[] = [];
const samples: { at: number; rss: number }[] = [];
let requests = 0;
let rounds = 0;
const started = Date.now();
try {
  const operations = operationsOf(await fetchDocument(server.url));
  const world = await FuzzWorld.create(server.url, adminToken, receiver.url);
  while (Date.now() - started < seconds * 1000) {
    const seed = (firstSeed + rounds) % 2 ** 31;
    const result = await fuzzOperations(server.url, operations, world, {
      runsPerOperation: runs,
      seed,
      timeLimitMs: 30_000,
      onOperation: () => {
        samples.push({ at: Date.now() - started, rss: rssOf(pid) });
      },
    });
    requests += result.requests;
    findings.push(...result.findings);
    rounds++;
    process.stderr.write(
      `fuzz ${backend}: round ${rounds} (seed ${seed}), ${requests} requests, ` +
        `${findings.length} findings, RSS ${Math.round(samples[samples.length - 1].rss / MiB)} MiB\n`,
    );
  }
  const health = await fetch(`${server.url}/healthz`);
  if (health.status !== 200)
    findings.push({
      operation: 'GET /healthz',
      request: '',
      answer: String(health.status),
      problems: ['the server stopped answering'],
    });
} finally {
  server.child.kill('SIGTERM');
  await exitWithin(server, 15_000).catch(() => server.child.kill('SIGKILL'));
  await receiver.close();
  await store.destroy();
}

// What the server logged as an error (a 5xx, a failed job), with its cause: findings too.
for (const line of server.stdout().split('\n')) {
  if (!line.startsWith('{')) continue;
  const entry = JSON.parse(line) as {
    level?: number;
    msg?: string;
    err?: { message?: string };
    req?: { url?: string };
  };
  if ((entry.level ?? 0) < 50) continue;
  findings.push({
    operation: `server log: ${entry.msg}`,
    request: entry.req?.url ?? '',
    answer: entry.err?.message ?? '',
    problems: ['the server logged an error'],
  });
}

const elapsed = (Date.now() - started) / 1000;
const half = samples.filter((s) => s.at <= (elapsed * 1000) / 2);
const firstHalfMax = Math.max(...half.map((s) => s.rss));
const end = samples[samples.length - 1].rss;
const flat = end <= firstHalfMax * 1.1 + 32 * MiB;
for (const f of findings) process.stderr.write(`${JSON.stringify(f)}\n`);
process.stdout.write(
  `${JSON.stringify({
    bench: 'fuzz',
    backend,
    seconds: Math.round(elapsed),
    rounds,
    requests,
    requestsPerSecond: Math.round(requests / elapsed),
    findings: findings.length,
    firstSeed,
    rssFirstHalfMaxMiB: Math.round(firstHalfMax / MiB),
    rssEndMiB: Math.round(end / MiB),
    memoryFlat: flat,
  })}\n`,
);
process.exit(findings.length === 0 && flat ? 0 : 1);
