import cluster from 'node:cluster';
import type { Command } from 'commander';
import { CliError } from './errors.ts';

interface StartOptions {
  port?: string;
  host?: string;
  dataDir?: string;
  workers?: string;
}

/** `liveline start`: runs the server in the foreground. Flags win over the environment. */
export function registerStart(program: Command) {
  program
    .command('start')
    .description('run the server (settings from the environment; see docs/configuration.md)')
    .option('--port <port>', 'port to listen on (overrides $PORT, default 8080)')
    .option('--host <host>', 'address to bind (overrides $HOST, default 0.0.0.0)')
    .option(
      '--data-dir <dir>',
      'directory for the SQLite file and the admin token (overrides $LIVELINE_DATA_DIR)',
    )
    .option(
      '--workers <n>',
      'run n server processes sharing the port (needs DATABASE_URL and REDIS_URL; default 1)',
    )
    .action(async (opts: StartOptions) => {
      const overrides: Record<string, string> = {};
      if (opts.port !== undefined) overrides.PORT = opts.port;
      if (opts.host !== undefined) overrides.HOST = opts.host;
      if (opts.dataDir !== undefined) overrides.LIVELINE_DATA_DIR = opts.dataDir;
      const workers = opts.workers === undefined ? 1 : Number(opts.workers);
      if (!Number.isInteger(workers) || workers < 1 || workers > 64) {
        throw new CliError(
          'invalid_option',
          `--workers must be an integer from 1 to 64, got "${opts.workers}"`,
        );
      }
      // A worker of the cluster runs this same command line: it is a server like any other.
      if (workers > 1 && cluster.isPrimary) {
        const { runCluster } = await import('./cluster.ts');
        await runCluster(workers, { ...process.env, ...overrides });
        return;
      }
      // Loaded here, not at the top: the admin commands should not pay for loading the whole server.
      const { runServer } = await import('./run-server.ts');
      await runServer({ overrides });
    });
}
