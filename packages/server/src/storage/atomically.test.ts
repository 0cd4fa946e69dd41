import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { dropSchema } from '../../test/helpers/schema.ts';
import { backends } from '../../test/helpers/server.ts';
import { createPostgresStorage } from './dialects/postgres.ts';
import { createSqliteStorage } from './dialects/sqlite.ts';
import { Statement } from './statement.ts';
import type { Storage } from './storage.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function open(kind: 'sqlite' | 'sqlite-main' | 'postgres'): Promise<Storage> {
  let storage: Storage;
  if (kind === 'postgres') {
    const schema = `atomically_${process.pid}_${Date.now()}`;
    storage = await createPostgresStorage({ url: process.env.DATABASE_URL!, schema });
    cleanups.push(() => dropSchema(schema));
  } else {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-atomically-'));
    cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
    storage = await createSqliteStorage({
      dataDir: dir,
      synchronous: 'NORMAL',
      thread: kind === 'sqlite-main' ? 'main' : 'worker',
    });
  }
  cleanups.push(() => storage.close());
  await sql`create table kv (k text primary key, v text not null)`.execute(storage.db);
  return storage;
}

const INSERT = new Statement('insert into kv (k, v) values (?, ?)');
const APPEND = new Statement("update kv set v = v || '!' where k = ? returning k, v");
const COUNT = new Statement('select count(*) as n from kv');

const kinds = [...backends.filter((b) => b === 'postgres'), 'sqlite', 'sqlite-main'] as const;

describe.each(kinds)('Storage.atomically (%s)', (kind) => {
  it("runs the statements as one transaction and returns each one's rows", async () => {
    const s = await open(kind);
    const results = await s.atomically([
      INSERT.bind(s.dialect, ['a', '1']),
      INSERT.bind(s.dialect, ['b', '2']),
      APPEND.bind(s.dialect, ['b']),
      COUNT.bind(s.dialect, []),
    ]);
    expect(results.slice(0, 3)).toEqual([[], [], [{ k: 'b', v: '2!' }]]);
    expect(Number(results[3][0].n)).toBe(2);
    // One statement alone.
    expect(await s.atomically([APPEND.bind(s.dialect, ['a'])])).toEqual([[{ k: 'a', v: '1!' }]]);
    expect(await s.atomically([])).toEqual([]);
  });

  it('writes nothing when a statement fails', async () => {
    const s = await open(kind);
    await s.atomically([INSERT.bind(s.dialect, ['a', '1'])]);
    const failing = s.atomically([
      INSERT.bind(s.dialect, ['c', '3']),
      APPEND.bind(s.dialect, ['a']),
      INSERT.bind(s.dialect, ['a', 'again']),
    ]);
    await expect(failing).rejects.toSatisfy((err: unknown) => s.isUniqueViolation(err));
    const rows = await s.db
      .selectFrom('kv' as never)
      .selectAll()
      .execute();
    expect(rows).toEqual([{ k: 'a', v: '1' }]);
  });
});
