/** The server as a library: what an embedding program or a test harness starts it with. */
export { type Config, ConfigError, loadConfig } from './config.ts';
export { createLogger, type RunningServer, startServer } from './server.ts';
