import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropSchema } from '../../../test/helpers/schema.ts';
import { backends } from '../../../test/helpers/server.ts';
import { openStorage, type Storage } from '../../storage/index.ts';
import * as store from './store.ts';

/**
 * The delivery marks (one transaction, a statement per delivery time) and a group's acks (one
 * statement over many rows) update the same commands rows at once. Each locks rows in the order its
 * plan meets them unless both take them in id order first (`lockInOrder`); under load the two
 * deadlocked on PostgreSQL (a CI run of the SIGTERM drain test: `deadlock detected` in
 * `commands.delivery-marks`). Here both run over the same rows in opposite orders, many rounds: with
 * `lockInOrder` off this fails with 40P01 (checked); with it on no round deadlocks.
 */
const ROUNDS = 40;
const ROWS = 200;

describe.each(backends.filter((b) => b === 'postgres'))('commands rows locked in id order (%s)', () => {
  const schema = `cmdlock_${process.pid}_${Date.now()}`;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-cmdlock-'));
  let storage: Storage;

  beforeAll(async () => {
    storage = await openStorage({
      databaseUrl: process.env.DATABASE_URL ?? null,
      databaseSchema: schema,
      dataDir,
      sqliteSynchronous: 'NORMAL',
    });
  });
  afterAll(async () => {
    await storage?.close();
    await dropSchema(schema);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('the delivery marks and an ack group over the same rows never deadlock', async () => {
    const lockInOrder = storage.skipLocked;
    expect(storage.skipLocked).toBe(true);
    for (let round = 0; round < ROUNDS; round++) {
      const now = Date.now();
      const rows = Array.from({ length: ROWS }, (_, i) => ({
        command_id: `r${String(round).padStart(3, '0')}-${String(i).padStart(4, '0')}`,
        session_id: `s${i % 10}`,
        tenant_id: 't',
        name: 'text',
        data: '{}',
        status: 'queued',
        issued_at: now,
        expires_at: now + 60_000,
        delivered_at: null,
        settled_at: null,
        error: null,
        idempotency_key: null,
        batch_id: null,
        request_hash: null,
      }));
      await storage.atomically(store.insertStatements(storage.dialect, rows));
      const ids = rows.map((r) => r.command_id);
      // The marks: the later half first (its time is earlier), then the earlier half.
      const byTime = new Map([
        [now, ids.slice(ROWS / 2)],
        [now + 1, ids.slice(0, ROWS / 2)],
      ]);
      const marks = storage.atomically(
        store.deliveryMarkStatements(storage.db, storage.dialect, byTime, { lockInOrder }),
      );
      // The acks: every row, named from the last; plain acks and failures (one statement each).
      const settlements = [...rows].reverse().map((r, i) => ({
        sessionId: r.session_id,
        commandId: r.command_id,
        status: i % 7 === 0 ? ('failed' as const) : ('acknowledged' as const),
        error: i % 7 === 0 ? 'no' : null,
      }));
      const settle = store.settleStatements(storage.db, storage.dialect, settlements, now, { lockInOrder });
      const acks = storage.atomically(settle.statements).then((results) => settle.read(results));
      const [, settled] = await Promise.all([marks, acks]);
      expect(settled.every((row) => row !== undefined)).toBe(true);
    }
    const open = await storage.db
      .selectFrom('commands')
      .select('command_id')
      .where('status', 'in', ['queued', 'delivered'])
      .execute();
    expect(open).toEqual([]);
  });
});
