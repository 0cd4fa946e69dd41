import type { Command } from 'commander';

interface StartOptions {
  port?: string;
  host?: string;
  dataDir?: string;
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
    .action(async (opts: StartOptions) => {
      const overrides: Record<string, string> = {};
      if (opts.port !== undefined) overrides.PORT = opts.port;
      if (opts.host !== undefined) overrides.HOST = opts.host;
      if (opts.dataDir !== undefined) overrides.LIVELINE_DATA_DIR = opts.dataDir;
      // Loaded here, not at the top: the admin commands should not pay for loading the whole server.
      const { runServer } = await import('./run-server.ts');
      await runServer({ overrides });
    });
}
