import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken } from '../helpers/api.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * A session's events come back ordered by timestamp, then id, in byte order (CONTRACT §4), on SQLite
 * and PostgreSQL alike, whatever PostgreSQL's default collation (migration 005: `COLLATE "C"`).
 * Under a linguistic collation such as en-US, `_x` sorts before `0`, `a-b` between `A` and `ab`, and
 * `aB` after `ab`; in byte order they do not. The PostgreSQL pass runs in the test database and in a
 * database of its own whose default collation is en-US, where an unmigrated column would sort them
 * the linguistic way.
 */

const IDS = ['a-b', 'aB', 'A', '_x', 'ab', 'a', 'Z', '0', '-x', '~', 'a b', 'é', 'e', 'E', 'ä', 'z'];
const BYTE_ORDER = [...IDS].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));

interface Target {
  name: string;
  start(): Promise<TestServer>;
}

const targets: Target[] = [{ name: 'sqlite', start: () => startTestServer('sqlite') }];
const databases: { url: string; name: string }[] = [];
const DATABASE_URL = process.env.DATABASE_URL;
if (DATABASE_URL) {
  targets.push({ name: 'postgres', start: () => startTestServer('postgres') });
  targets.push({
    name: 'postgres, en-US default collation',
    async start() {
      const url = await linguisticDatabase(DATABASE_URL);
      return startTestServer('postgres', { DATABASE_URL: url });
    },
  });
}

/** A new database whose default collation is en-US (ICU, else glibc's en_US), for this test only. */
async function linguisticDatabase(adminUrl: string) {
  const name = `liveline_collation_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const icu = await admin.query("select 1 from pg_collation where collprovider = 'i' limit 1");
    const libc = await admin.query(
      "select collcollate from pg_collation where collprovider = 'c' and collname ilike 'en_US.utf%8' limit 1",
    );
    if (icu.rowCount) {
      await admin.query(
        `create database ${name} template template0 encoding 'UTF8' locale_provider icu icu_locale 'en-US' locale 'C.UTF-8'`,
      );
    } else if (libc.rowCount) {
      const locale = String(libc.rows[0].collcollate);
      await admin.query(`create database ${name} template template0 encoding 'UTF8' locale '${locale}'`);
    } else {
      throw new Error(
        'this PostgreSQL has no en-US collation (ICU or glibc): the byte-order check needs one',
      );
    }
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  databases.push({ url: url.toString(), name });
  return url.toString();
}

/** How the database orders IDS by its default collation (no COLLATE): what an unmigrated column does. */
async function defaultOrder(url: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query('select x from unnest($1::text[]) x order by x', [IDS]);
    return rows.map((r) => String(r.x));
  } finally {
    await client.end();
  }
}

describe('event order is byte order on every backend', () => {
  afterAll(async () => {
    if (!DATABASE_URL) return;
    const admin = new pg.Client({ connectionString: DATABASE_URL });
    await admin.connect();
    try {
      for (const { name } of databases.splice(0))
        await admin.query(`drop database if exists ${name} with (force)`);
    } finally {
      await admin.end();
    }
  });

  it('orders ids that linguistic collations order differently the same way, in full and page by page', async () => {
    const seen = new Map<string, { full: string[]; paged: string[] }>();
    for (const target of targets) {
      const server = await target.start();
      try {
        const tenant = await createTenant(server.url, server.adminToken);
        const token = await deviceToken(server.url, tenant.token, 'collation');
        const created = await call(server.url, 'POST', '/client/v1/sessions', { token, json: {} });
        const sessionId = String(created.body.sessionId);
        // One timestamp for all: the id alone decides the order.
        const timestamp = Date.now() - 1000;
        const ingested = await call(server.url, 'POST', `/sessions/${sessionId}/events`, {
          token,
          json: { events: IDS.map((id) => ({ id, eventType: 'Custom', timestamp })) },
        });
        expect(ingested.body).toEqual({ accepted: IDS.length, duplicates: 0 });

        const whole = await call<{ events: { id: string }[] }>(server.url, 'GET', `/sessions/${sessionId}`, {
          token: tenant.token,
        });
        const full = whole.body.events.map((e) => e.id);
        // Two at a time: every page starts after the cursor of the last, compared in the same order.
        const paged: string[] = [];
        let after: string | null = null;
        do {
          const query: string = after ? `&after=${after}` : '';
          const page = await call<{ events: { id: string }[]; nextCursor: string | null }>(
            server.url,
            'GET',
            `/sessions/${sessionId}/events?limit=2${query}`,
            { token: tenant.token },
          );
          expect(page.status).toBe(200);
          paged.push(...page.body.events.map((e) => e.id));
          after = page.body.nextCursor;
        } while (after);
        seen.set(target.name, { full, paged });
      } finally {
        await server.close();
      }
    }
    for (const [name, { full, paged }] of seen) {
      expect({ name, full }).toEqual({ name, full: BYTE_ORDER });
      expect({ name, paged }).toEqual({ name, paged: BYTE_ORDER });
    }
    // The en-US database really orders these ids another way by default: without migration 005
    // its events would come back in that order, and the check above would fail.
    const linguistic = databases[0];
    if (linguistic) expect(await defaultOrder(linguistic.url)).not.toEqual(BYTE_ORDER);
  }, 120_000);
});
