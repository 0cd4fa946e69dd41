// Starts a server for a benchmark in its own process, configured from the environment, and
// prints its URL and admin token as one JSON line on stdout.
import { loadConfig } from '../packages/server/src/config.ts';
import { createLogger, startServer } from '../packages/server/src/server.ts';

const config = loadConfig(process.env);
const server = await startServer(config, { logger: createLogger('warn') });
process.stdout.write(`${JSON.stringify({ url: server.url, adminToken: config.adminToken })}\n`);
process.on('SIGTERM', () => {
  server.close().then(() => process.exit(0));
});
