import { type ChildProcess, execFile, spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';

/** Helpers for tests that run the real `liveline` process. */

export const ROOT = path.resolve(import.meta.dirname, '../../../..');
/**
 * How the tests run `liveline`: the bundle test/global-setup.ts builds from the source at the start of
 * every test run (packages/server/scripts/bundle.mjs), which starts with a third to half less CPU than
 * the TypeScript through tsx, on a suite that starts hundreds of processes. `BIN` is what users run
 * (tsx); `cli(…, { bin: true })`, the README walk-throughs and `liveline openapi` go through it.
 * `NODE_OPTIONS=--enable-source-maps` maps a child's stack traces back to the TypeScript.
 */
export const CLI = ['packages/server/dist/cli/liveline.mjs'];
export const BIN = 'packages/server/bin/liveline.js';
// A start takes a second or two alone, tens with three test files running at once on a loaded
// two-core machine (seen: 20 s passed in a CI run beside other work).
export const STARTUP_TIMEOUT_MS = 45_000;

export type Env = Record<string, string>;

/** The test runner's environment without anything that would steer the child's settings. */
export function baseEnv(extra: Env): Env {
  const env: Env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (
      v === undefined ||
      k === 'PORT' ||
      k === 'HOST' ||
      k === 'DATABASE_URL' ||
      k === 'REDIS_URL' ||
      k.startsWith('LIVELINE_')
    )
      continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs `liveline <args>` as a child process, collecting what it prints. */
export function spawnCli(args: string[], env: Env) {
  const child = spawn(process.execPath, [...CLI, ...args], {
    cwd: ROOT,
    env: baseEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Starts `liveline start` on an ephemeral port and waits for the URL it logs. */
export async function startProcess(env: Env, options: { timeoutMs?: number } = {}): Promise<ServerProcess> {
  const timeoutMs = options.timeoutMs ?? STARTUP_TIMEOUT_MS;
  const { child, stdout, stderr, exited } = spawnCli(['start'], {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    LIVELINE_SQLITE_SYNCHRONOUS: 'NORMAL',
    ...env,
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      // A server that did not start in time must not outlive the test that gave up on it.
      child.kill('SIGKILL');
      reject(new Error(`no listening line within ${timeoutMs} ms:\n${stdout()}\n${stderr()}`));
    }, timeoutMs);
    const check = () => {
      for (const line of stdout().split('\n')) {
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg?.startsWith('liveline listening') && entry.url) {
          clearTimeout(timer);
          // Not on every later chunk: a busy server prints a line per request, and each look splits all of it.
          child.stdout?.off('data', check);
          resolve(entry.url);
          return;
        }
      }
    };
    child.stdout?.on('data', check);
    void exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${stdout()}\n${stderr()}`));
    });
  });
  return { child, url, stdout, stderr, exited };
}

/** Waits for the exit of a process, failing after `ms`. */
export async function exitWithin(p: ServerProcess, ms: number) {
  const started = Date.now();
  const result = await Promise.race([
    p.exited,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`still running after ${ms} ms`)), ms),
    ),
  ]);
  return { ...result, elapsedMs: Date.now() - started };
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the `liveline` CLI (the test bundle, or the bin script through tsx) and collects what it printed. */
export function cli(args: string[], env: Env = {}, options: { bin?: boolean } = {}): Promise<CliResult> {
  const argv = options.bin ? [BIN, ...args] : [...CLI, ...args];
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      argv,
      { cwd: ROOT, env: baseEnv(env), timeout: 20_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

export function logLines(stdout: string): string[] {
  return stdout.split('\n').filter((l) => l.startsWith('{'));
}

/** A port nothing listens on (it was free a moment ago). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

export async function sleep(ms: number) {
  await new Promise((r) => setTimeout(r, ms));
}
