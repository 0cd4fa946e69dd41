import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { dropSchema } from '../../test/helpers/schema.ts';
import { backends } from '../../test/helpers/server.ts';
import { createPostgresStorage, inlined } from './dialects/postgres.ts';
import { createSqliteStorage } from './dialects/sqlite.ts';
import { CompiledOnce, param, Statement } from './statement.ts';
import type { Storage } from './storage.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function open(kind: 'sqlite' | 'sqlite-main' | 'postgres', poolSize?: number): Promise<Storage> {
  let storage: Storage;
  if (kind === 'postgres') {
    const schema = `atomically_${process.pid}_${Date.now()}`;
    storage = await createPostgresStorage({ url: process.env.DATABASE_URL!, schema, poolSize });
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

// Prepared on PostgreSQL (`CompiledStatement.prepare`); SQLite caches every statement anyway.
const PREPARE = { prepare: true };
const INSERT = new Statement('insert into kv (k, v) values (?, ?)', PREPARE);
const APPEND = new Statement("update kv set v = v || '!' where k = ? returning k, v", PREPARE);
const COUNT = new Statement('select count(*) as n from kv', PREPARE);

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

describe.each(backends.filter((b) => b === 'postgres'))('Storage.atomically, durable: false (%s)', () => {
  it('commits without waiting for the WAL flush (synchronous_commit off), that transaction only, one or many statements', async () => {
    const s = await open('postgres');
    const SHOW = new Statement('show synchronous_commit');
    expect(await s.atomically([SHOW.bind(s.dialect, [])])).toEqual([[{ synchronous_commit: 'on' }]]);
    const lone = await s.atomically([SHOW.bind(s.dialect, [])], { durable: false });
    expect(lone).toEqual([[{ synchronous_commit: 'off' }]]);
    const group = await s.atomically([INSERT.bind(s.dialect, ['a', '1']), SHOW.bind(s.dialect, [])], {
      durable: false,
    });
    expect(group).toEqual([[], [{ synchronous_commit: 'off' }]]);
    expect(await s.atomically([SHOW.bind(s.dialect, [])])).toEqual([[{ synchronous_commit: 'on' }]]);
    expect(await sql`select k, v from kv`.execute(s.db).then((r) => r.rows)).toEqual([{ k: 'a', v: '1' }]);
  });
});

describe.each(backends.filter((b) => b === 'postgres'))(
  'Storage.atomically on PostgreSQL (%s): values written into one query',
  () => {
    const TRICKY = [
      "it's",
      "back\\slash \\' and \\n",
      "'); drop table kv; --",
      '$1 $2 $$ $& literal dollars',
      'emoji 🎧 and ünïcödé',
      '',
      '\u001e\t\r\n',
    ];

    it('keeps every string exactly, whatever quotes, backslashes or dollars it holds', async () => {
      const s = await open('postgres');
      const statements = TRICKY.map((v, i) => INSERT.bind(s.dialect, [`k${i}`, v]));
      await s.atomically([...statements, COUNT.bind(s.dialect, [])]);
      const rows = await sql<{ k: string; v: string }>`select k, v from kv order by k`.execute(s.db);
      expect(rows.rows.map((r) => r.v)).toEqual(TRICKY);
    });

    it('writes numbers, negatives, booleans and nulls as values, never as SQL', async () => {
      const s = await open('postgres');
      const ARITHMETIC = new Statement(
        'select 10 -? as a, ? * 2 as b, ?::boolean as c, ? is null as d, ?::text as e',
      );
      const [, [row]] = await s.atomically([
        INSERT.bind(s.dialect, ['x', '1']),
        ARITHMETIC.bind(s.dialect, [-5, 1.5, false, null, 1_700_000_000_000]),
      ]);
      expect(row).toEqual({ a: 15, b: '3.0', c: false, d: true, e: '1700000000000' });
      expect(inlined(ARITHMETIC.bind('postgres', [-5, 1, true, null, 2]))).toBe(
        'select 10 -(-5) as a, (1) * 2 as b, true::boolean as c, null is null as d, (2)::text as e',
      );
    });

    // The connection's own prepared statements, read through `atomically` (a pool of one connection).
    const PREPARED = new Statement('select count(*)::int as n from pg_prepared_statements', PREPARE);
    const preparedCount = async (s: Storage) =>
      (await s.atomically([COUNT.bind(s.dialect, []), PREPARED.bind(s.dialect, [])]))[1][0].n;

    it('prepares each statement once per connection and runs it by name after', async () => {
      const s = await open('postgres', 1);
      for (let i = 0; i < 3; i++) {
        await s.atomically([INSERT.bind(s.dialect, [`k${i}`, 'v']), APPEND.bind(s.dialect, ['k0'])]);
      }
      const rows = await sql<{ k: string; v: string }>`select k, v from kv order by k`.execute(s.db);
      expect(rows.rows).toEqual([
        { k: 'k0', v: 'v!!!' },
        { k: 'k1', v: 'v' },
        { k: 'k2', v: 'v' },
      ]);
      // A statement not marked `prepare` goes with its values written in, as it always did.
      const PLAIN = new Statement('select ? as one');
      expect((await s.atomically([COUNT.bind(s.dialect, []), PLAIN.bind(s.dialect, [1])]))[1]).toEqual([
        { one: 1 },
      ]);
      // INSERT, APPEND, COUNT and PREPARED: each prepared once, however often it ran; PLAIN not.
      expect(await preparedCount(s)).toBe(4);
      expect(await preparedCount(s)).toBe(4);
      // A failed query that prepared nothing keeps its connection and what it holds.
      await expect(
        s.atomically([INSERT.bind(s.dialect, ['k9', 'v']), INSERT.bind(s.dialect, ['k0', 'again'])]),
      ).rejects.toSatisfy((err: unknown) => s.isUniqueViolation(err));
      expect(await preparedCount(s)).toBe(4);
      // One that prepared something takes its connection with it (which PREPAREs ran is not known);
      // the next query prepares again on a new one.
      const INSERT_AGAIN = new Statement('insert into kv (k, v) values (?, ?) returning k', PREPARE);
      await expect(
        s.atomically([INSERT_AGAIN.bind(s.dialect, ['k8', 'v']), INSERT.bind(s.dialect, ['k0', 'again'])]),
      ).rejects.toSatisfy((err: unknown) => s.isUniqueViolation(err));
      expect(await preparedCount(s)).toBe(2);
      expect((await sql`select k from kv where k in ('k8', 'k9')`.execute(s.db)).rows).toEqual([]);
    });

    it('writes in the values of a statement it cannot prepare, and prepares the others', async () => {
      const s = await open('postgres', 1);
      // `? is null`: no type for the parameter but its value's.
      const UNTYPED = new Statement('select ? is null as missing', PREPARE);
      const APPEND_AGAIN = new Statement("update kv set v = v || '+' where k = ? returning v", PREPARE);
      await s.atomically([INSERT.bind(s.dialect, ['a', 'v']), INSERT.bind(s.dialect, ['b', 'v'])]);
      for (const value of [null, 'x', null]) {
        const [, row] = await s.atomically([
          APPEND_AGAIN.bind(s.dialect, ['a']),
          UNTYPED.bind(s.dialect, [value]),
        ]);
        expect(row).toEqual([{ missing: value === null }]);
      }
      expect((await sql`select v from kv where k = 'a'`.execute(s.db)).rows).toEqual([{ v: 'v+++' }]);
      // On the connection that replaced the one the failed PREPARE took: APPEND_AGAIN (prepared, not
      // written in with the one that could not be), COUNT and PREPARED.
      expect(await preparedCount(s)).toBe(3);
    });

    it('keeps at most 256 prepared statements on a connection', async () => {
      const s = await open('postgres', 1);
      for (let i = 0; i < 300; i++) {
        const ADD = new Statement(`select ? + ${i} as x`, PREPARE);
        const [, [row]] = await s.atomically([COUNT.bind(s.dialect, []), ADD.bind(s.dialect, [1])]);
        expect(row).toEqual({ x: 1 + i });
      }
      expect(await preparedCount(s)).toBeLessThanOrEqual(256);
    });

    it('falls back to one statement at a time for a value it does not write in (U+0000, an object)', async () => {
      expect(inlined(INSERT.bind('postgres', ['a', 'nul \u0000 inside']))).toBeUndefined();
      expect(inlined(INSERT.bind('postgres', ['a', { not: 'a string' }]))).toBeUndefined();
      expect(inlined(INSERT.bind('postgres', ['a', Number.NaN]))).toBeUndefined();
      const s = await open('postgres');
      // Still all or nothing: PostgreSQL refuses U+0000 in text, and the statement before goes with it.
      const failing = s.atomically([
        INSERT.bind(s.dialect, ['a', '1']),
        INSERT.bind(s.dialect, ['b', 'x\u0000y']),
      ]);
      await expect(failing).rejects.toThrow();
      expect((await sql`select k from kv`.execute(s.db)).rows).toEqual([]);
    });
  },
);

const KV = new CompiledOnce<{ k: string; v: string }>((db) =>
  db
    .selectFrom('kv' as never)
    .select(['k' as never, 'v' as never])
    .where('k' as never, 'in', [param('first'), param('second')] as never)
    .where('v' as never, '!=', param('first') as never)
    .orderBy('k' as never),
);

describe.each(kinds)('CompiledOnce (%s)', (kind) => {
  it('runs again with other values, each put in by name wherever the SQL takes it', async () => {
    const s = await open(kind);
    await s.atomically(['a', 'b', 'c'].map((k) => INSERT.bind(s.dialect, [k, `${k}!`])));
    expect(await KV.run(s.db, { first: 'a', second: 'c' })).toEqual([
      { k: 'a', v: 'a!' },
      { k: 'c', v: 'c!' },
    ]);
    expect(await KV.run(s.db, { first: 'b', second: 'b' })).toEqual([{ k: 'b', v: 'b!' }]);
    await expect(KV.run(s.db, { first: 'a' })).rejects.toThrow('no value for :second');
  });

  it('is still a select of the query builder: on SQLite it does not wait for a write transaction', async () => {
    const s = await open(kind);
    await s.atomically([INSERT.bind(s.dialect, ['a', 'x'])]);
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const writing = s.db.transaction().execute(async (trx) => {
      await sql`insert into kv (k, v) values ('b', 'y')`.execute(trx);
      await held;
    });
    // With a single connection (SQLite, thread 'main') a read outside the transaction waits for it.
    if (kind === 'sqlite-main') {
      release();
      await writing;
    }
    const rows = await KV.run(s.db, { first: 'a', second: 'b' });
    expect(rows).toEqual(
      kind === 'sqlite-main'
        ? [
            { k: 'a', v: 'x' },
            { k: 'b', v: 'y' },
          ]
        : [{ k: 'a', v: 'x' }],
    );
    release();
    await writing;
  });
});
