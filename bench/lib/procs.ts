// Child processes of the fleet benchmarks (command-load.ts, idle-sockets.ts): the liveline server and
// the bare relay, each in its own process with an IPC channel, plus what is read about them from /proc.
// Every child and temp dir is registered for cleanup: `runMain` runs it on success, on failure, on
// SIGINT/SIGTERM and when the overall deadline passes. The children also exit by themselves when this
// process goes away (their IPC channel closes), so even a SIGKILLed benchmark leaves no server behind.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dropSchema } from '../../packages/server/test/helpers/schema.ts';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export type Backend = 'sqlite' | 'postgres';

// ---------------------------------------------------------------------------------------------
// Cleanup

const cleanups: (() => Promise<void> | void)[] = [];

/** Registers something to undo when the benchmark ends, however it ends (run last-registered first). */
export function onCleanup(fn: () => Promise<void> | void) {
  cleanups.push(fn);
}

async function cleanupAll() {
  while (cleanups.length > 0) {
    const fn = cleanups.pop()!;
    try {
      await fn();
    } catch (err) {
      process.stderr.write(`cleanup failed: ${err instanceof Error ? err.message : String(err)}\n`);
    }
  }
}

/**
 * Runs a benchmark's body, then cleans up. Fails (exit 1) on an error, and after `deadlineS` seconds
 * whatever the body is doing, so every run is bounded in time.
 */
export function runMain(name: string, deadlineS: number, body: () => Promise<void>) {
  let finishing = false;
  const finish = async (code: number) => {
    if (finishing) return;
    finishing = true;
    await cleanupAll();
    process.exit(code);
  };
  const timer = setTimeout(() => {
    process.stderr.write(`${name}: still running after ${deadlineS} s; stopping\n`);
    void finish(1);
  }, deadlineS * 1000);
  timer.unref();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      process.stderr.write(`${name}: ${signal}; cleaning up\n`);
      void finish(130);
    });
  }
  body().then(
    () => finish(0),
    (err: unknown) => {
      process.stderr.write(
        `${name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
      void finish(1);
    },
  );
}

// ---------------------------------------------------------------------------------------------
// Children

export interface MemoryReport {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

export interface ChildServer {
  label: string;
  url: string;
  pid: number;
  child: ChildProcess;
  /** The child's memory after a full GC (liveline only: it runs with --expose-gc and answers over IPC). */
  memory(): Promise<MemoryReport>;
  /** The last lines the child wrote (for failure reports). */
  tail(): string;
  stop(): Promise<void>;
}

/** Everything of this process's environment except what would steer the child's store or address. */
function inheritedEnv(): Record<string, string> {
  const skip = new Set([
    'PORT',
    'HOST',
    'DATABASE_URL',
    'REDIS_URL',
    'LIVELINE_DATABASE_SCHEMA',
    'LIVELINE_DATA_DIR',
  ]);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !skip.has(k)) env[k] = v;
  return env;
}

async function startChild(
  label: string,
  nodeArgs: string[],
  script: string,
  env: Record<string, string>,
  afterStop: () => Promise<void> | void,
): Promise<ChildServer> {
  // BENCH_STDOUT_FILE=/tmp/out: the server's standard output goes to /tmp/out.<label> (what V8 prints
  // there, e.g. `--trace-gc-nvp` through BENCH_SERVER_NODE_ARGS); otherwise its tail is kept for errors.
  const stdoutFile = process.env.BENCH_STDOUT_FILE
    ? fs.openSync(`${process.env.BENCH_STDOUT_FILE}.${label}`, 'a')
    : undefined;
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script], {
    cwd: ROOT,
    env: { ...inheritedEnv(), ...env },
    stdio: ['ignore', stdoutFile ?? 'pipe', 'pipe', 'ipc'],
  });
  if (stdoutFile !== undefined) fs.closeSync(stdoutFile);
  let output = '';
  const keep = (d: Buffer) => {
    output = (output + d.toString()).slice(-8000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
    }
    await afterStop();
  };
  onCleanup(stop);

  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${label} did not start within 60 s:\n${output}`)),
      60_000,
    );
    child.on('message', (m: { type?: string; url?: string }) => {
      if (m.type === 'ready' && m.url) {
        clearTimeout(timer);
        resolve(m.url);
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(
        new Error(`${label} exited (${child.exitCode ?? child.signalCode}) before it listened:\n${output}`),
      );
    });
  });

  let memoryWaiter: ((m: MemoryReport) => void) | null = null;
  child.on('message', (m: { type?: string } & Partial<MemoryReport>) => {
    if (m.type === 'memory' && memoryWaiter) memoryWaiter(m as MemoryReport);
  });
  return {
    label,
    url,
    pid: child.pid!,
    child,
    memory() {
      return new Promise<MemoryReport>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${label}: no memory answer`)), 30_000);
        memoryWaiter = (m) => {
          clearTimeout(timer);
          memoryWaiter = null;
          resolve(m);
        };
        child.send({ type: 'memory' });
      });
    },
    tail: () => output,
    stop,
  };
}

export interface LivelineServer extends ChildServer {
  adminToken: string;
  backend: Backend;
  /** Its store: the SQLite data dir, and the PostgreSQL schema on PostgreSQL. */
  dataDir: string;
  schema?: string;
}

export interface LivelineOptions {
  backend: Backend;
  /** Extra settings (win over the defaults below). */
  env?: Record<string, string>;
  /** Share this PostgreSQL schema (several processes of one deployment); not dropped on stop. */
  sharedSchema?: string;
  adminToken?: string;
  /** Use this data dir (and keep it on stop: its owner removes it), e.g. to restart on the same store. */
  dataDir?: string;
  label?: string;
}

/**
 * Starts liveline (`runServer`, as `liveline start` does) in a child process on a fresh store:
 * a temp data dir for SQLite, a new schema for PostgreSQL (dropped on stop). Rate limits off,
 * log level warn, 127.0.0.1 on an ephemeral port.
 */
export async function startLiveline(options: LivelineOptions): Promise<LivelineServer> {
  const dataDir = options.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-bench-'));
  const ownDataDir = !options.dataDir;
  const ownSchema = options.backend === 'postgres' && !options.sharedSchema;
  const schema = options.sharedSchema ?? `bench_${randomBytes(5).toString('hex')}`;
  const adminToken = options.adminToken ?? `bench-admin-${randomBytes(12).toString('hex')}`;
  if (options.backend === 'postgres' && !process.env.DATABASE_URL)
    throw new Error('BENCH_BACKEND=postgres needs DATABASE_URL');
  const env: Record<string, string> = {
    PORT: '0',
    HOST: '127.0.0.1',
    // BENCH_LOG_LEVEL=info measures with a default deployment's request logs (one line a request).
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    LIVELINE_DATA_DIR: dataDir,
    LIVELINE_ADMIN_TOKEN: adminToken,
    LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
    LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
    // BENCH_SQLITE_SYNCHRONOUS=NORMAL measures without an fsync per commit (the default is FULL).
    ...(process.env.BENCH_SQLITE_SYNCHRONOUS
      ? { LIVELINE_SQLITE_SYNCHRONOUS: process.env.BENCH_SQLITE_SYNCHRONOUS }
      : {}),
    ...(options.backend === 'postgres'
      ? { DATABASE_URL: process.env.DATABASE_URL ?? '', LIVELINE_DATABASE_SCHEMA: schema }
      : {}),
    ...options.env,
  };
  const server = await startChild(
    options.label ?? 'liveline',
    // BENCH_SERVER_NODE_ARGS adds flags, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" for a profile.
    ['--expose-gc', ...(process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean)],
    path.join(ROOT, 'bench/lib/server-entry.ts'),
    env,
    async () => {
      if (ownDataDir) fs.rmSync(dataDir, { recursive: true, force: true });
      if (ownSchema) await dropSchema(schema);
    },
  );
  return {
    ...server,
    adminToken,
    backend: options.backend,
    dataDir,
    schema: options.backend === 'postgres' ? schema : undefined,
  };
}

/** A store that outlives one server process (restarts): a temp dir, and a schema on PostgreSQL. */
export function sharedStore(backend: Backend) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-bench-'));
  const schema = backend === 'postgres' ? `bench_${randomBytes(5).toString('hex')}` : undefined;
  onCleanup(async () => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    if (schema) await dropSchema(schema);
  });
  return { dataDir, schema };
}

export { dropSchema };

/**
 * Starts the bare relay (bench/relay.ts) in a child process; with `durable`, the durable relay on a
 * fresh store of that kind (a temp dir, or a new PostgreSQL schema; removed on stop), or on
 * `sharedSchema` (PostgreSQL; the caller removes it). `env` adds settings (a pair's Redis channel).
 */
export function startRelay(
  options: { durable?: Backend; sharedSchema?: string; env?: Record<string, string>; label?: string } = {},
): Promise<ChildServer> {
  // BENCH_RELAY_NODE_ARGS: as BENCH_SERVER_NODE_ARGS, for the relays (a profile of the floor).
  const args = (process.env.BENCH_RELAY_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const file = path.join(ROOT, 'bench/relay.ts');
  const extra = options.env ?? {};
  if (!options.durable) return startChild(options.label ?? 'relay', args, file, extra, () => {});
  const postgres = options.durable === 'postgres';
  if (postgres && !process.env.DATABASE_URL)
    throw new Error('a durable relay on postgres needs DATABASE_URL');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-bench-relay-'));
  const schema = options.sharedSchema ?? `bench_${randomBytes(5).toString('hex')}`;
  const env: Record<string, string> = {
    RELAY_DURABLE: options.durable,
    RELAY_DATA_DIR: dataDir,
    ...(postgres
      ? { RELAY_DATABASE_URL: process.env.DATABASE_URL ?? '', RELAY_DATABASE_SCHEMA: schema }
      : {}),
    ...extra,
  };
  return startChild(options.label ?? 'durable relay', args, file, env, async () => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    if (postgres && !options.sharedSchema) await dropSchema(schema);
  });
}

// ---------------------------------------------------------------------------------------------
// /proc

let clockTicks = 0;
function ticksPerSecond() {
  if (clockTicks === 0) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the command name: state is field 3, utime field 14 and stime field 15 (1-based, man 5 proc).
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond();
}

/** Resident set size of a process in bytes, from /proc/<pid>/status. */
export function rssBytes(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  return match ? Number(match[1]) * 1024 : Number.NaN;
}

/** Measures a process's CPU over a window: call `stop()` at its end for % of one core. */
export function cpuMeter(pid: number) {
  const c0 = cpuSeconds(pid);
  const t0 = performance.now();
  return {
    stop() {
      const seconds = (performance.now() - t0) / 1000;
      return Number((((cpuSeconds(pid) - c0) / seconds) * 100).toFixed(1));
    },
  };
}

/**
 * Time a process's main thread spent runnable but waiting for a CPU (run-queue wait, from
 * /proc/<pid>/schedstat) over a window, as % of the window: the machine's contention as that
 * process felt it. A generator with low CPU but high wait was delayed by others, not saturated.
 */
export function waitMeter(pid: number | 'self') {
  const read = () => Number(fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e9;
  const w0 = read();
  const t0 = performance.now();
  return {
    stop() {
      const seconds = (performance.now() - t0) / 1000;
      return Number((((read() - w0) / seconds) * 100).toFixed(1));
    },
  };
}

/** This process's open-file limit (soft), from /proc/self/limits. */
export function openFileLimit(pid: number | 'self' = 'self'): number {
  const limits = fs.readFileSync(`/proc/${pid}/limits`, 'utf8');
  const match = /^Max open files\s+(\d+|unlimited)/m.exec(limits);
  return !match || match[1] === 'unlimited' ? Number.POSITIVE_INFINITY : Number(match[1]);
}

export function machine() {
  return {
    nproc: os.availableParallelism(),
    memoryGiB: Number((os.totalmem() / 2 ** 30).toFixed(1)),
    node: process.version,
    commit: gitCommit(),
  };
}

function gitCommit() {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  } catch {
    return 'unknown';
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
