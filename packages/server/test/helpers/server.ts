import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import pino from 'pino';
import type { Clock } from '../../src/clock.ts';
import { type Config, loadConfig } from '../../src/config.ts';
import { type RunningServer, startServer } from '../../src/server.ts';
import { openStorage, type Storage } from '../../src/storage/index.ts';
import { dropSchema } from './schema.ts';

export type Backend = 'sqlite' | 'postgres';

/**
 * The backends every storage-touching test runs against: SQLite always, PostgreSQL when
 * DATABASE_URL is set. Under CI the PostgreSQL pass is required, never silently dropped.
 */
export const backends: Backend[] = process.env.DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];
if (process.env.CI && !process.env.DATABASE_URL) {
  throw new Error('CI is set but DATABASE_URL is not: the PostgreSQL pass would not run.');
}

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface TestServer extends RunningServer {
  backend: Backend;
  config: Config;
  adminToken: string;
}

/** Storage settings for a fresh, private store: a temp dir for SQLite, a new schema for PostgreSQL. */
export function freshStore(backend: Backend) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-test-'));
  const schema = backend === 'postgres' ? `t_${randomBytes(6).toString('hex')}` : null;
  const env: Record<string, string> = { LIVELINE_DATA_DIR: dataDir };
  if (schema) {
    env.DATABASE_URL = process.env.DATABASE_URL ?? '';
    env.LIVELINE_DATABASE_SCHEMA = schema;
  }
  return {
    dataDir,
    schema,
    env,
    async destroy() {
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (schema) await dropSchema(schema);
    },
  };
}

/** A `freshStore` opened (and migrated) in this process: for tests of the store's own queries. */
export function openFreshStore(backend: Backend, store: ReturnType<typeof freshStore>): Promise<Storage> {
  return openStorage({
    databaseUrl: backend === 'postgres' ? (process.env.DATABASE_URL ?? null) : null,
    databaseSchema: store.schema ?? 'public',
    dataDir: store.dataDir,
    sqliteSynchronous: 'NORMAL',
  });
}

/** Starts a real server on an ephemeral port with its own store. */
export async function startTestServer(
  backend: Backend,
  env: Record<string, string> = {},
  options: { clock?: Clock; spanProcessor?: SpanProcessor } = {},
): Promise<TestServer> {
  const store = freshStore(backend);
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
    LIVELINE_SQLITE_SYNCHRONOUS: 'NORMAL',
    // No load shedding: an in-process server shares its event loop with the test (and its worker with
    // other test files on a loaded machine), so a lag there is the harness's, not an overloaded server's.
    // load-shedding.test.ts turns it on.
    LIVELINE_MAX_EVENT_LOOP_DELAY_MS: '0',
    ...store.env,
    ...env,
  });
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  let server: RunningServer;
  try {
    server = await startServer(config, {
      clock: options.clock,
      logger,
      spanProcessor: options.spanProcessor,
    });
  } catch (err) {
    await store.destroy();
    throw err;
  }
  return {
    ...server,
    backend,
    config,
    adminToken: config.adminToken ?? ADMIN_TOKEN,
    async close() {
      await server.close();
      await store.destroy();
    },
  };
}

/** A clock tests can move by hand. */
export function manualClock(start = Date.now()) {
  let now = start;
  return {
    now: () => now,
    set(ms: number) {
      now = ms;
    },
    advance(ms: number) {
      now += ms;
    },
  };
}
