import type { Logger } from 'pino';
import { type Config, ConfigError, loadConfig } from '../config.ts';
import { createLogger, type RunningServer, startServer } from '../server.ts';

/** Exit codes of `liveline start`. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_CONFIG = 2;

type Env = Record<string, string | undefined>;

export interface RunServerOptions {
  /** The environment to read settings from (default `process.env`). */
  env?: Env;
  /** Settings given as command-line flags; they win over the environment. */
  overrides?: Env;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The generated operator token goes to stdout, once, never through the logger (logs get shipped and kept). */
function announceOperatorToken(token: string, file: string | null) {
  const where = file ? `It was saved to ${file} (mode 0600), where \`liveline admin\` finds it.` : '';
  process.stdout.write(
    [
      '',
      'liveline generated an operator (admin) token. It is shown only this once:',
      '',
      `    ${token}`,
      '',
      `${where} Set LIVELINE_ADMIN_TOKEN to use a token of your own.`.trim(),
      '',
      '',
    ].join('\n'),
  );
}

/**
 * SIGTERM/SIGINT: stop accepting, let in-flight requests finish (`app.close()`), exit 0; exit 1 when
 * that takes longer than `shutdownTimeoutMs`. Further signals during shutdown are ignored: `npm start`
 * forwards Ctrl-C to a process that already got it from the terminal, and that must not cut requests off.
 */
function exitOnSignals(server: RunningServer, config: Config, logger: Logger) {
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.debug({ signal }, 'already shutting down');
      return;
    }
    stopping = true;
    logger.info({ signal, timeoutMs: config.shutdownTimeoutMs }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown timed out; exiting');
      process.exit(EXIT_FAILURE);
    }, config.shutdownTimeoutMs);
    server.close().then(
      () => {
        clearTimeout(timer);
        logger.info('stopped');
        process.exit(EXIT_OK);
      },
      (err: unknown) => {
        clearTimeout(timer);
        logger.error({ err }, 'shutdown failed');
        process.exit(EXIT_FAILURE);
      },
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

/**
 * The process entry of `liveline start`: reads the configuration (a bad one exits 2 with the reason
 * on stderr), starts the server, prints a newly generated operator token once, and exits cleanly
 * on SIGTERM/SIGINT. Resolves once the server listens.
 */
export async function runServer(options: RunServerOptions = {}): Promise<RunningServer> {
  const env: Env = { ...(options.env ?? process.env), ...options.overrides };
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`liveline: invalid configuration: ${err.message}\n`);
      process.exit(EXIT_CONFIG);
    }
    throw err;
  }

  const logger = createLogger(config.logLevel);
  let server: RunningServer;
  try {
    server = await startServer(config, { logger });
  } catch (err) {
    logger.fatal({ err }, 'liveline could not start');
    process.stderr.write(`liveline: could not start: ${describe(err)}\n`);
    process.exit(EXIT_FAILURE);
  }

  const { operator } = server.services;
  if (operator.generated) announceOperatorToken(operator.generated, operator.file);
  logger.info(
    { url: server.url, docs: `${server.url}/docs`, storage: server.services.storage.dialect },
    `liveline listening on ${server.url}`,
  );
  exitOnSignals(server, config, logger);
  return server;
}
