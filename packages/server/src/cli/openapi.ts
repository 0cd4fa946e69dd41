import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';

/**
 * The OpenAPI document the server publishes at `/openapi.json`, built in this process: the app is
 * composed on a throw-away SQLite store and never listens. What `npm run lint:api` checks and what
 * the tenant client is generated from.
 */
export async function openapiDocument(): Promise<Record<string, unknown>> {
  // Loaded here, not at the top: every `liveline` command imports this file, and only this one needs
  // the whole server (the admin commands start in a fraction of the time without it).
  const [{ default: pino }, { buildApp }, { systemClock }, { compose }, { loadConfig }] = await Promise.all([
    import('pino'),
    import('../app.ts'),
    import('../clock.ts'),
    import('../compose.ts'),
    import('../config.ts'),
  ]);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-openapi-'));
  try {
    // Only the defaults: the document does not depend on the environment of the caller.
    const config = loadConfig({ LIVELINE_DATA_DIR: dataDir });
    const services = await compose(config, systemClock, pino({ level: 'silent' }));
    try {
      const app = await buildApp(services);
      try {
        const res = await app.inject({ method: 'GET', url: '/openapi.json' });
        if (res.statusCode !== 200) throw new Error(`/openapi.json answered ${res.statusCode}`);
        return res.json();
      } finally {
        await app.close();
      }
    } finally {
      await services.close();
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/** `liveline openapi`: prints the document (no server needed), e.g. to generate a client from it. */
export function registerOpenapi(program: Command) {
  program
    .command('openapi')
    .description('print the OpenAPI 3.1 document of this version of the server (no server is started)')
    .action(async () => {
      process.stdout.write(`${JSON.stringify(await openapiDocument(), null, 2)}\n`);
    });
}
