import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../server/test/helpers/server.ts';

// The typed client is generated from the server's OpenAPI document; when a route changes, the
// generated file must be regenerated (`npm run generate -w @liveline/tenant`) or this fails.
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer('sqlite');
});
afterAll(async () => server?.close());

it('src/generated/api.ts was generated from the current /openapi.json', async () => {
  const document = await (await fetch(`${server.url}/openapi.json`)).json();
  const current = createHash('sha256').update(JSON.stringify(document)).digest('hex');
  const generated = fs.readFileSync(path.resolve(import.meta.dirname, '../src/generated/api.ts'), 'utf8');
  const recorded = /^\/\/ openapi sha256: ([0-9a-f]{64})$/m.exec(generated)?.[1];
  expect(recorded, 'run `npm run generate -w @liveline/tenant` against a server of this tree').toBe(current);
});
