import cluster, { type Worker } from 'node:cluster';
import { type Config, ConfigError, loadConfig } from '../config.ts';
import { createLogger } from '../server.ts';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK } from './run-server.ts';

type Env = Record<string, string | undefined>;

/** A worker that dies within this long of starting is not replaced (it would only die again). */
const MIN_UPTIME_MS = 5000;

/**
 * `liveline start --workers N`: N server processes on one machine sharing one port (node:cluster).
 * They share work through PostgreSQL and Redis (CONTRACT §9.1), so both are required. The primary
 * only supervises: it starts one worker first (it migrates the schema and creates keys), then the
 * rest; replaces a worker that dies; and on SIGTERM/SIGINT stops them all and exits 0.
 */
export async function runCluster(workers: number, env: Env): Promise<void> {
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`liveline: invalid configuration: ${err.message}\n`);
    process.exit(EXIT_CONFIG);
  }
  const missing = [
    !config.databaseUrl && 'DATABASE_URL (PostgreSQL)',
    !config.redisUrl && 'REDIS_URL',
  ].filter(Boolean);
  if (missing.length > 0) {
    process.stderr.write(
      `liveline: --workers ${workers} runs several processes, which share their work through ` +
        `PostgreSQL and Redis: set ${missing.join(' and ')}. (One process needs neither: drop --workers.)\n`,
    );
    process.exit(EXIT_FAILURE);
  }
  const logger = createLogger(config.logLevel);
  let stopping = false;
  const startedAt = new Map<Worker, number>();

  const fork = () =>
    new Promise<Worker>((resolve, reject) => {
      const worker = cluster.fork(env);
      startedAt.set(worker, Date.now());
      worker.once('listening', () => resolve(worker));
      worker.once('exit', (code) => reject(new Error(`worker exited with ${code} before listening`)));
    });

  cluster.on('exit', (worker, code, signal) => {
    const uptime = Date.now() - (startedAt.get(worker) ?? 0);
    startedAt.delete(worker);
    if (stopping) return;
    logger.error({ pid: worker.process.pid, code, signal }, 'worker died');
    if (uptime < MIN_UPTIME_MS) {
      logger.fatal('a worker died right after starting: stopping');
      stop('SIGTERM', EXIT_FAILURE);
      return;
    }
    fork().catch((err: unknown) => logger.error({ err }, 'replacement worker failed'));
  });

  const stop = (signal: NodeJS.Signals, exitCode = EXIT_OK) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping workers');
    const timer = setTimeout(() => {
      logger.error('workers did not stop in time');
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGKILL');
      process.exit(EXIT_FAILURE);
    }, config.shutdownTimeoutMs + 1000);
    const alive = Object.values(cluster.workers ?? {}).filter((w): w is Worker => Boolean(w));
    let failed = false;
    void Promise.all(
      alive.map(
        (worker) =>
          new Promise<void>((resolve) => {
            worker.once('exit', (code) => {
              if (code !== 0) failed = true;
              resolve();
            });
            worker.process.kill('SIGTERM');
          }),
      ),
    ).then(() => {
      clearTimeout(timer);
      process.exit(failed ? EXIT_FAILURE : exitCode);
    });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  try {
    await fork();
    await Promise.all(Array.from({ length: workers - 1 }, fork));
  } catch (err) {
    logger.fatal({ err }, 'liveline could not start its workers');
    process.stderr.write(`liveline: could not start: ${err instanceof Error ? err.message : String(err)}\n`);
    stop('SIGTERM', EXIT_FAILURE);
    return;
  }
  logger.info({ workers }, `liveline runs ${workers} workers`);
}
