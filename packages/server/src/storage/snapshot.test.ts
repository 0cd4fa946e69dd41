import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { dropSchema } from '../../test/helpers/schema.ts';
import { backends } from '../../test/helpers/server.ts';
import { createPostgresStorage } from './dialects/postgres.ts';
import { createSqliteStorage } from './dialects/sqlite.ts';
import { inSnapshot } from './snapshot.ts';
import type { Storage } from './storage.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function open(kind: 'sqlite' | 'postgres'): Promise<Storage> {
  let storage: Storage;
  if (kind === 'postgres') {
    const schema = `snapshot_${process.pid}_${Date.now()}`;
    storage = await createPostgresStorage({ url: process.env.DATABASE_URL!, schema });
    cleanups.push(() => dropSchema(schema));
  } else {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-snapshot-'));
    cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
    storage = await createSqliteStorage({ dataDir: dir, synchronous: 'NORMAL' });
  }
  cleanups.push(() => storage.close());
  await sql`create table kv (k text primary key, v text not null)`.execute(storage.db);
  await sql`insert into kv (k, v) values ('a', 'pending')`.execute(storage.db);
  return storage;
}

const read = async (db: Storage['db']) =>
  (await sql<{ v: string }>`select v from kv where k = 'a'`.execute(db)).rows[0]?.v;

describe.each(backends)('inSnapshot (%s)', (backend) => {
  it('sees one state across its reads while another write commits between them', async () => {
    const storage = await open(backend);
    let writeDone: Promise<unknown> | undefined;
    const seen = await inSnapshot(storage, async (db) => {
      const first = await read(db);
      // A write from outside the snapshot, started between the two reads: on PostgreSQL it commits
      // at once (another connection), on SQLite it waits for the snapshot's transaction to end.
      writeDone = sql`update kv set v = 'delivered' where k = 'a'`.execute(storage.db);
      if (backend === 'postgres') await writeDone;
      const second = await read(db);
      return [first, second];
    });
    await writeDone;
    expect(seen).toEqual(['pending', 'pending']);
    expect(await read(storage.db)).toBe('delivered');
  });
});
