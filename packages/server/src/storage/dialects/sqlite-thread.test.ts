import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kysely, sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { EVENTS_TABLE } from '../../modules/events/index.ts';
import { migrate } from '../index.ts';
import type { Storage } from '../storage.ts';
import { createSqliteStorage } from './sqlite.ts';
import { MainThreadReader, SqliteThread, SqliteThreadDialect } from './sqlite-thread.ts';

interface Db {
  kv: { k: string; v: string };
}

const dirs: string[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function tempDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-sqlite-thread-'));
  dirs.push(dir);
  return dir;
}

/** A Kysely over the worker driver on a fresh file with one table `kv`. */
async function open(reads: 'main' | 'worker' = 'main', synchronous: 'FULL' | 'NORMAL' = 'NORMAL') {
  const file = path.join(tempDir(), 'test.db');
  const thread = await SqliteThread.start({ file, synchronous, statementCacheSize: 8 });
  const reader = reads === 'main' ? new MainThreadReader(file) : null;
  const dialect = new SqliteThreadDialect({ thread, reader });
  const db = new Kysely<Db>({ dialect });
  cleanups.push(async () => {
    await db.destroy();
    await thread.close();
  });
  await db.schema
    .createTable('kv')
    .addColumn('k', 'text', (c) => c.primaryKey())
    .addColumn('v', 'text')
    .execute();
  return { db, thread, dialect };
}

const values = async (db: Kysely<Db>) =>
  (await db.selectFrom('kv').select(['k', 'v']).orderBy('k').execute()).map((r) => `${r.k}=${r.v}`);

describe.each(['main', 'worker'] as const)('SQLite worker driver (reads on %s)', (reads) => {
  it('runs queries in the worker and returns rows and affected counts', async () => {
    const { db } = await open(reads);
    const inserted = await db.insertInto('kv').values({ k: 'a', v: '1' }).executeTakeFirstOrThrow();
    expect(inserted.numInsertedOrUpdatedRows).toBe(1n);
    const updated = await db.updateTable('kv').set({ v: '2' }).where('k', '=', 'a').executeTakeFirstOrThrow();
    expect(updated.numUpdatedRows).toBe(1n);
    expect(await values(db)).toEqual(['a=2']);
    const returned = await db.insertInto('kv').values({ k: 'b', v: '3' }).returning('k').execute();
    expect(returned).toEqual([{ k: 'b' }]);
    expect((await sql<{ n: number }>`select count(*) as n from kv`.execute(db)).rows).toEqual([{ n: 2 }]);
  });

  it('rolls back a transaction that fails', async () => {
    const { db } = await open(reads);
    await db.insertInto('kv').values({ k: 'kept', v: '1' }).execute();
    await expect(
      db.transaction().execute(async (trx) => {
        await trx.insertInto('kv').values({ k: 'gone', v: '1' }).execute();
        await trx.updateTable('kv').set({ v: 'changed' }).where('k', '=', 'kept').execute();
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    // A statement that fails inside a transaction rolls it back too.
    await expect(
      db.transaction().execute(async (trx) => {
        await trx.insertInto('kv').values({ k: 'gone2', v: '1' }).execute();
        await trx.insertInto('kv').values({ k: 'kept', v: 'duplicate' }).execute();
      }),
    ).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    expect(await values(db)).toEqual(['kept=1']);
    // The connection is usable afterwards (no transaction left open).
    await db.transaction().execute((trx) => trx.insertInto('kv').values({ k: 'next', v: '1' }).execute());
    expect(await values(db)).toEqual(['kept=1', 'next=1']);
  });

  it('serialises concurrent transactions: nothing runs between a BEGIN and its COMMIT', async () => {
    const { db } = await open(reads);
    const log: string[] = [];
    const slow = db.transaction().execute(async (trx) => {
      await trx.insertInto('kv').values({ k: 'a1', v: 'x' }).execute();
      log.push('a1');
      await sleep(50);
      await trx.insertInto('kv').values({ k: 'a2', v: 'x' }).execute();
      log.push('a2');
      // Its own writes are visible inside it.
      expect(await trx.selectFrom('kv').select('k').execute()).toHaveLength(2);
    });
    await sleep(5);
    const others = Array.from({ length: 5 }, (_, i) =>
      db.transaction().execute(async (trx) => {
        await trx
          .insertInto('kv')
          .values({ k: `b${i}`, v: 'y' })
          .execute();
        log.push(`b${i}`);
      }),
    );
    // A single statement outside a transaction waits for the transaction too.
    const single = db
      .insertInto('kv')
      .values({ k: 'c', v: 'z' })
      .execute()
      .then(() => log.push('c'));
    await Promise.all([slow, ...others, single]);
    expect(log.slice(0, 2)).toEqual(['a1', 'a2']);
    expect(log).toHaveLength(8);
    expect(await values(db)).toHaveLength(8);
  });

  it('a COMMIT that fails is rolled back before the next transaction (queued behind it) runs', async () => {
    const { db } = await open(reads);
    await sql`create table parent (id text primary key)`.execute(db);
    await sql`create table child (id text primary key, parent text references parent (id))`.execute(db);
    // A deferred foreign key fails at COMMIT, not at the insert.
    const failing = db.transaction().execute(async (trx) => {
      await sql`pragma defer_foreign_keys = on`.execute(trx);
      await sql`insert into child (id, parent) values ('c', 'missing')`.execute(trx);
      await trx.insertInto('kv').values({ k: 'from-failed', v: '1' }).execute();
    });
    const next = db.transaction().execute(async (trx) => {
      await trx.insertInto('kv').values({ k: 'next', v: '1' }).execute();
    });
    await expect(failing).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_FOREIGNKEY' });
    await next;
    expect(await values(db)).toEqual(['next=1']);
    expect((await sql`select * from child`.execute(db)).rows).toEqual([]);
  });

  it('atomically: a whole transaction in one message, all or nothing, in turn with other transactions', async () => {
    const { db, dialect, thread } = await open(reads);
    const sent: string[] = [];
    const request = thread.request.bind(thread);
    thread.request = (message, transfer) => {
      sent.push(message.op);
      return request(message, transfer);
    };
    const results = await dialect.atomically([
      { sql: 'insert into kv (k, v) values (?, ?), (?, ?)', parameters: ['a', '1', 'b', '2'] },
      { sql: "update kv set v = v || '!' where k = ? returning k, v", parameters: ['b'] },
      { sql: 'select count(*) as n from kv', parameters: [] },
    ]);
    expect(sent).toEqual(['atomically']);
    expect(results).toEqual([[], [{ k: 'b', v: '2!' }], [{ n: 2 }]]);

    // A statement that fails: nothing of the group is written, the error keeps its code.
    await expect(
      dialect.atomically([
        { sql: 'insert into kv (k, v) values (?, ?)', parameters: ['c', '3'] },
        { sql: 'insert into kv (k, v) values (?, ?)', parameters: ['a', 'again'] },
      ]),
    ).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    expect(await values(db)).toEqual(['a=1', 'b=2!']);

    // It waits for a transaction in progress, and nothing of it runs inside that transaction.
    const log: string[] = [];
    const inProgress = db.transaction().execute(async (trx) => {
      await trx.insertInto('kv').values({ k: 't1', v: 'x' }).execute();
      await sleep(30);
      log.push('t');
      await trx.insertInto('kv').values({ k: 't2', v: 'x' }).execute();
    });
    await sleep(5);
    const group = dialect
      .atomically([{ sql: 'select count(*) as n from kv', parameters: [] }])
      .then((r) => log.push(`group saw ${(r[0][0] as { n: number }).n}`));
    await Promise.all([inProgress, group]);
    expect(log).toEqual(['t', 'group saw 4']);
  });

  it('the writer keeps temporary tables in memory (temp_store MEMORY), not in a file made for each', async () => {
    const { dialect } = await open(reads);
    // 2 is MEMORY: an `IN (…)` list or a `values` CTE of an update no longer creates a file.
    expect((await dialect.atomically([{ sql: 'pragma temp_store', parameters: [] }]))[0]).toEqual([
      { temp_store: 2 },
    ]);
  });

  it('atomically with durable: false commits at synchronous NORMAL, and the store is FULL again after it', async () => {
    const { db, dialect } = await open(reads, 'FULL');
    const level = async () => (await dialect.atomically([{ sql: 'pragma synchronous', parameters: [] }]))[0];
    expect(await level()).toEqual([{ synchronous: 2 }]);
    const lazy = await dialect.atomically(
      [
        { sql: 'insert into kv (k, v) values (?, ?)', parameters: ['lazy', '1'] },
        { sql: 'pragma synchronous', parameters: [] },
      ],
      { durable: false },
    );
    // 1 is NORMAL: this COMMIT did not wait for the disk.
    expect(lazy[1]).toEqual([{ synchronous: 1 }]);
    expect(await level()).toEqual([{ synchronous: 2 }]);
    // A lazy transaction that fails writes nothing and leaves the store FULL too.
    await expect(
      dialect.atomically(
        [
          { sql: 'insert into kv (k, v) values (?, ?)', parameters: ['other', '2'] },
          { sql: 'insert into kv (k, v) values (?, ?)', parameters: ['lazy', 'again'] },
        ],
        { durable: false },
      ),
    ).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    expect(await level()).toEqual([{ synchronous: 2 }]);
    expect(await values(db)).toEqual(['lazy=1']);
  });

  it('pipeline: a statement posted without waiting runs in order in its transaction and commits with it', async () => {
    const { db, dialect, thread } = await open(reads);
    const sent: string[] = [];
    const request = thread.request.bind(thread);
    thread.request = (message, transfer) => {
      sent.push(message.op === 'query' && 'pipelined' in message ? 'pipelined' : message.op);
      return request(message, transfer);
    };
    await db.transaction().execute(async (trx) => {
      // The transaction's first statement, pipelined: BEGIN travels with it.
      dialect.pipeline({ sql: 'insert into kv (k, v) values (?, ?)', parameters: ['p1', 'x'] });
      await trx.insertInto('kv').values({ k: 'k1', v: 'y' }).execute();
      dialect.pipeline({ sql: "update kv set v = v || '!' where k = ?", parameters: ['k1'] });
      // Read in the transaction, after both: the worker ran them in the order sent.
      const seen = await trx.selectFrom('kv').select(['k', 'v']).orderBy('k').execute();
      expect(seen).toEqual([
        { k: 'k1', v: 'y!' },
        { k: 'p1', v: 'x' },
      ]);
    });
    expect(sent).toEqual(['pipelined', 'query', 'pipelined', 'query', 'commit']);
    expect(await values(db)).toEqual(['k1=y!', 'p1=x']);
    // Outside a transaction there is nothing to pipeline into.
    expect(() => dialect.pipeline({ sql: 'select 1', parameters: [] })).toThrow('needs a transaction');
  });

  it('pipeline: a pipelined statement that fails writes nothing of its transaction, and refuses the rest', async () => {
    const { db, dialect } = await open(reads);
    await db.insertInto('kv').values({ k: 'a', v: '1' }).execute();
    const after: string[] = [];
    await expect(
      db.transaction().execute(async () => {
        dialect.pipeline({ sql: 'insert into kv (k, v) values (?, ?)', parameters: ['b', '2'] });
        dialect.pipeline({ sql: 'insert into kv (k, v) values (?, ?)', parameters: ['a', 'again'] });
        // Statements after it, pipelined or awaited, are refused with its error: none runs alone.
        dialect.pipeline({ sql: 'insert into kv (k, v) values (?, ?)', parameters: ['c', '3'] });
        after.push('posted');
      }),
    ).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    expect(after).toEqual(['posted']);
    expect(await values(db)).toEqual(['a=1']);

    await expect(
      db.transaction().execute(async (trx) => {
        await trx.insertInto('kv').values({ k: 'd', v: '4' }).execute();
        dialect.pipeline({ sql: 'insert into kv (k, v) values (?, ?)', parameters: ['a', 'again'] });
        await trx.insertInto('kv').values({ k: 'e', v: '5' }).execute();
      }),
    ).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    expect(await values(db)).toEqual(['a=1']);

    // The next transaction starts clean.
    await db.transaction().execute(async (trx) => {
      dialect.pipeline({ sql: 'insert into kv (k, v) values (?, ?)', parameters: ['f', '6'] });
      await trx.insertInto('kv').values({ k: 'g', v: '7' }).execute();
    });
    expect(await values(db)).toEqual(['a=1', 'f=6', 'g=7']);
  });

  it('a unique violation keeps its better-sqlite3 code and message', async () => {
    const { db } = await open(reads);
    await db.insertInto('kv').values({ k: 'a', v: '1' }).execute();
    const err = await db
      .insertInto('kv')
      .values({ k: 'a', v: '2' })
      .execute()
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(Error);
    expect(err).toMatchObject({ name: 'SqliteError', code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    expect(String((err as Error).message)).toMatch(/UNIQUE constraint failed: kv\.k/);
  });

  it('close() waits for work in flight, closes the database and ends the thread', async () => {
    const { db, thread } = await open(reads);
    const writing = db.transaction().execute(async (trx) => {
      await sleep(30);
      await trx.insertInto('kv').values({ k: 'late', v: '1' }).execute();
    });
    await sleep(5);
    await db.destroy();
    await writing;
    expect(thread.alive).toBe(false);
    await expect(thread.request({ op: 'query', sql: 'select 1', params: [], begin: false })).rejects.toThrow(
      /closed/,
    );
    await thread.close(); // idempotent
  });
});

describe('SQLite storage over the worker', () => {
  // The table as ingestion writes it.
  const EVENTS = EVENTS_TABLE;

  async function storage(): Promise<Storage> {
    const s = await createSqliteStorage({ dataDir: tempDir(), synchronous: 'FULL' });
    cleanups.push(() => s.close());
    await migrate(s);
    return s;
  }

  const row = (id: string) => ['s1', id, 'Custom', 1, null, 2, `{"id":"${id}"}`];

  it('migrates, and bulk-inserts a batch in its transaction, reporting which rows were new', async () => {
    const s = await storage();
    await s.bulk.insertIgnoringConflicts(s.db, EVENTS, [row('a')]);
    const inserted = await s.db.transaction().execute(async (trx) => {
      const flags = await s.bulk.insertIgnoringConflicts(trx, EVENTS, [row('a'), row('b'), row('c')]);
      const count = await trx
        .selectFrom('events')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .execute();
      expect(count).toEqual([{ n: 3 }]);
      return flags;
    });
    expect(inserted).toEqual([false, true, true]);
    await expect(
      s.db.transaction().execute(async (trx) => {
        await s.bulk.insertIgnoringConflicts(trx, EVENTS, [row('d')]);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    const ids = await s.db.selectFrom('events').select('event_id').orderBy('event_id').execute();
    expect(ids.map((r) => r.event_id)).toEqual(['a', 'b', 'c']);
  });

  it('isUniqueViolation recognises the error that crossed the thread', async () => {
    const s = await storage();
    const insert = () =>
      s.db
        .insertInto('events')
        .values({
          session_id: 's',
          event_id: 'e',
          event_type: 'Custom',
          timestamp: 1,
          streaming_session_id: null,
          received_at: 1,
          body: '{}',
        })
        .execute();
    await insert();
    const err = await insert().then(
      () => null,
      (e: unknown) => e,
    );
    expect(s.isUniqueViolation(err)).toBe(true);
    expect(s.isUniqueViolation(new Error('other'))).toBe(false);
  });

  it('opens and closes many stores without leaving threads behind', async () => {
    // OS threads of this process (Linux): a worker that did not end would stay in the count.
    const threads = () => (fs.existsSync('/proc/self/task') ? fs.readdirSync('/proc/self/task').length : 0);
    const cycle = async () => {
      const s = await createSqliteStorage({ dataDir: tempDir(), synchronous: 'NORMAL' });
      await s.ping();
      await s.close();
      await s.close();
    };
    await cycle(); // the first one starts libuv's pool threads, which stay
    const before = threads();
    for (let i = 0; i < 10; i++) await cycle();
    expect(threads()).toBeLessThanOrEqual(before);
    // A store closed before any query ran ends its thread too.
    const unused = await createSqliteStorage({ dataDir: tempDir(), synchronous: 'NORMAL' });
    await unused.close();
    await expect(unused.ping()).rejects.toThrow();
  });
});
