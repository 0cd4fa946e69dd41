import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, sleep } from './process.ts';

/**
 * Redis for tests: each suite starts its own `redis-server` on a free port (so it can kill and
 * restart it), keeping nothing on disk. Suites that need Redis run when `redis-server` is on the
 * machine; under CI they must run (`.ci/run` installs it and counts the `(redis)` tests).
 */
export const redisServerPath = (() => {
  try {
    return execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
})();

export const redisAvailable = redisServerPath !== null;
if (process.env.CI && !redisAvailable) {
  throw new Error('CI is set but redis-server is not installed: the Redis suites would not run.');
}

export interface TestRedis {
  url: string;
  port: number;
  /** A key prefix no other test uses. */
  prefix(): string;
  /** Kills the server (SIGKILL): clients see the connection drop. */
  kill(): Promise<void>;
  /** Starts it again on the same port (empty: nothing was kept). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

async function waitForPort(port: number, child: ChildProcess) {
  const until = Date.now() + 10_000;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
    try {
      execFileSync('redis-cli', ['-p', String(port), 'ping'], { stdio: 'pipe' });
      return;
    } catch {
      await sleep(50);
    }
  }
  throw new Error(`redis-server did not answer on port ${port}`);
}

export async function startRedis(): Promise<TestRedis> {
  if (!redisServerPath) throw new Error('redis-server is not installed');
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-redis-'));
  let child: ChildProcess;
  const launch = async () => {
    child = spawn(
      redisServerPath!,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      { stdio: 'ignore' },
    );
    await waitForPort(port, child);
  };
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  };
  await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    prefix: () => `t${randomBytes(4).toString('hex')}:`,
    kill,
    restart: launch,
    async stop() {
      await kill();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
