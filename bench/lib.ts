import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import pg from 'pg';

export interface BenchServer {
  url: string;
  adminToken: string;
  child: ChildProcess;
  dataDir: string;
  schema: string | null;
  stop(): Promise<void>;
}

/** Starts `bench/serve.ts` in a child process on a fresh store; rate limits off. */
export async function startBenchServer(backend: 'sqlite' | 'postgres', env: Record<string, string> = {}) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-bench-'));
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const adminToken = `bench-admin-${randomBytes(8).toString('hex')}`;
  const profile = process.env.BENCH_PROFILE_DIR
    ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_PROFILE_DIR]
    : [];
  // As for the fleet benchmarks (lib/procs.ts): flags for the server's Node, e.g. V8's GC settings.
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(
    process.execPath,
    [...profile, ...nodeArgs, '--import', 'tsx', path.join(import.meta.dirname, 'serve.ts')],
    {
      env: {
        ...process.env,
        PORT: '0',
        HOST: '127.0.0.1',
        LIVELINE_DATA_DIR: dataDir,
        LIVELINE_ADMIN_TOKEN: adminToken,
        LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
        LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
        ...(backend === 'postgres'
          ? { DATABASE_URL: process.env.DATABASE_URL ?? '', LIVELINE_DATABASE_SCHEMA: schema }
          : { DATABASE_URL: '' }),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const line = await new Promise<string>((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout! });
    rl.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)));
  });
  const { url } = JSON.parse(line) as { url: string };
  return {
    url,
    adminToken,
    child,
    /** The server's store, for a benchmark that seeds it directly: its data dir, its PostgreSQL schema. */
    dataDir,
    schema: backend === 'postgres' ? schema : null,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (backend === 'postgres') {
        const c = new pg.Client({ connectionString: process.env.DATABASE_URL });
        await c.connect();
        await c.query(`drop schema if exists "${schema}" cascade`);
        await c.end();
      }
    },
  } satisfies BenchServer;
}

export function percentile(sorted: number[], p: number) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
