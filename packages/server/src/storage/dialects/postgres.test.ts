import { afterEach, describe, expect, it } from 'vitest';
import { dropSchema } from '../../../test/helpers/schema.ts';
import { backends } from '../../../test/helpers/server.ts';
import { openStorage } from '../index.ts';
import type { Storage } from '../storage.ts';

const DATABASE_URL = process.env.DATABASE_URL;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function deployment(schema: string): Promise<Storage> {
  cleanups.push(() => dropSchema(schema));
  const storage = await openStorage({
    databaseUrl: DATABASE_URL ?? null,
    databaseSchema: schema,
    dataDir: '',
    sqliteSynchronous: 'NORMAL',
  });
  cleanups.push(() => storage.close());
  return storage;
}

describe.each(backends.filter((b) => b === 'postgres'))('PostgreSQL storage (%s)', () => {
  it("introspects its own schema only, so others' schemas coming and going never fail a migration", async () => {
    const tag = `${process.pid}_${Date.now()}`;
    const a = await deployment(`introspect_a_${tag}`);
    await deployment(`introspect_b_${tag}`);
    const tables = await a.db.introspection.getTables({ withInternalKyselyTables: true });
    expect(tables.length).toBeGreaterThan(10);
    expect(new Set(tables.map((t) => t.schema))).toEqual(new Set([`introspect_a_${tag}`]));
    expect(tables.map((t) => t.name)).toContain('kysely_migration');

    // Migrations run while other schemas are created and dropped all along.
    let churning = true;
    const churn = (async () => {
      for (let i = 0; churning; i++) {
        const other = `introspect_churn_${tag}_${i}`;
        await deployment(other);
        await dropSchema(other);
      }
    })();
    const started = await Promise.all(
      Array.from({ length: 4 }, (_, i) => deployment(`introspect_m${i}_${tag}`)),
    );
    churning = false;
    await churn;
    expect(started).toHaveLength(4);
  });
});
