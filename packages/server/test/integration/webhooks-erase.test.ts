import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eraseUnsent } from '../../src/modules/webhooks/erase.ts';
import { FanoutWriter, messagesOf } from '../../src/modules/webhooks/fanout-row.ts';
import type { Storage } from '../../src/storage/index.ts';
import { backends, freshStore, openFreshStore } from '../helpers/server.ts';

/**
 * A player's erasure in the webhook tables (CONTRACT §16: "nothing of the player survives in the
 * delivery log beyond deliveries already sent"), on a real store of each dialect: unsent deliveries
 * naming an erased session or the player go with their attempts, sent ones and `player.erased` stay,
 * and fan-out rows not yet expanded are rewritten without the player's messages (their layout and
 * endpoint indexes renumbered), or deleted when nothing else is in them.
 */
describe.each(backends)('webhook erasure (%s)', (backend) => {
  const store = freshStore(backend);
  let storage: Storage;
  beforeAll(async () => {
    storage = await openFreshStore(backend, store);
  });
  afterAll(async () => {
    await storage?.close();
    await store.destroy();
  });

  const tenantId = randomUUID();
  const erased = randomUUID();
  const kept = randomUUID();
  const message = (sessionId: string, n: number) =>
    `{"type":"session.event","timestamp":"2026-11-21T10:00:00.000Z","data":{"id":"e${n}","sessionId":"${sessionId}"}}`;

  async function delivery(type: string, status: string, payload: string) {
    const id = randomUUID();
    await storage.db
      .insertInto('webhook_deliveries')
      .values({
        delivery_id: id,
        webhook_id: 'w1',
        tenant_id: tenantId,
        type,
        event_type: null,
        payload,
        status,
        attempts: 1,
        next_attempt_at: 0,
        claim_id: null,
        created_at: 0,
        last_attempt_at: null,
        last_status_code: null,
        last_error: null,
        completed_at: null,
      })
      .execute();
    await storage.db
      .insertInto('webhook_attempts')
      .values({
        attempt_id: randomUUID(),
        delivery_id: id,
        webhook_id: 'w1',
        attempted_at: 0,
        status_code: 500,
        latency_ms: 1,
        error: null,
      })
      .execute();
    return id;
  }

  /** A fan-out row as written before 2026-11-27: whole messages, `[[eventType, length], …]`. */
  async function fanout(messages: string[], targets: unknown) {
    return insertFanout(
      {
        messages: messages.join(''),
        layout: JSON.stringify(messages.map((m) => ['Custom', m.length])),
      },
      targets,
    );
  }

  async function insertFanout(row: { messages: string; layout: string }, targets: unknown) {
    const id = randomUUID();
    await storage.db
      .insertInto('webhook_fanout')
      .values({
        fanout_id: id,
        tenant_id: tenantId,
        ...row,
        targets: JSON.stringify(targets),
        deliveries: 0,
        created_at: 0,
      })
      .execute();
    return id;
  }

  it('deletes unsent deliveries naming the player, keeps sent ones, rewrites fan-out rows', async () => {
    const player = '"playerId":"Player-1"';
    const gone = [
      await delivery('session.event', 'pending', message(erased, 1)),
      await delivery('session.event', 'failed', message(erased, 2)),
      await delivery('reward.claimed', 'pending', `{"type":"reward.claimed","data":{${player}}}`),
    ];
    const stay = [
      await delivery('session.event', 'delivered', message(erased, 3)),
      await delivery('session.event', 'pending', message(kept, 4)),
      await delivery('player.erased', 'pending', `{"type":"player.erased","data":{${player}}}`),
      // Another player whose id differs only in case (SQLite's `like` ignores case): kept.
      await delivery('reward.claimed', 'pending', `{"type":"reward.claimed","data":{"playerId":"player-1"}}`),
    ];
    const mixed = await fanout(
      [message(erased, 5), message(kept, 6), message(erased, 7), message(kept, 8)],
      [
        ['w1', null],
        ['w2', [1, 2]],
        ['w3', [0, 2]],
      ],
    );
    const only = await fanout([message(erased, 9)], [['w1', null]]);

    // 3 deliveries and 3 fan-out messages.
    expect(await eraseUnsent(storage.db, tenantId, [erased, player], 500)).toBe(6);
    expect(await eraseUnsent(storage.db, tenantId, [erased, player], 500)).toBe(0);

    const left = await storage.db.selectFrom('webhook_deliveries').select('delivery_id').execute();
    expect(left.map((r) => r.delivery_id).sort()).toEqual([...stay].sort());
    const attempts = await storage.db.selectFrom('webhook_attempts').select('delivery_id').execute();
    expect(attempts.map((r) => r.delivery_id).sort()).toEqual([...stay].sort());
    for (const id of gone) expect(left.some((r) => r.delivery_id === id)).toBe(false);

    const rows = await storage.db.selectFrom('webhook_fanout').selectAll().execute();
    expect(rows.map((r) => r.fanout_id)).toEqual([mixed]);
    const row = rows[0];
    expect(messagesOf(row).map(([, body]) => body)).toEqual([message(kept, 6), message(kept, 8)]);
    // w1 takes all that is left; w2 kept its message 1 (now 0); w3 had only erased ones.
    expect(JSON.parse(row.targets)).toEqual([
      ['w1', null],
      ['w2', [0]],
    ]);
    expect(Number(row.deliveries)).toBe(3);
    expect(only).not.toBe(mixed);
  });

  it("rewrites a fan-out row as ingestion writes it (the events' texts and their contexts) in that form", async () => {
    const a = randomUUID();
    const b = randomUUID();
    const event = (sessionId: string, n: number) => `{"sessionId":"${sessionId}","id":"e${n}"}`;
    const writer = new FanoutWriter();
    writer.add('Custom', event(b, 1), [Date.UTC(2026, 10, 27), 'class-1']);
    writer.add('Custom', event(a, 2), [Date.UTC(2026, 10, 27), 'class-1']);
    writer.add('Health', event(b, 3), [Date.UTC(2026, 10, 27, 0, 0, 1), null]);
    const written = writer.finish();
    const before = messagesOf(written);
    const id = await insertFanout(written, [['w1', null]]);

    expect(await eraseUnsent(storage.db, tenantId, [b], 500)).toBe(2);
    const row = await storage.db
      .selectFrom('webhook_fanout')
      .selectAll()
      .where('fanout_id', '=', id)
      .executeTakeFirstOrThrow();
    // The message left is the one it was, built from the event's text and context kept in the row.
    expect(messagesOf(row)).toEqual([before[1]]);
    expect(row.messages).toBe(event(a, 2));
    expect(JSON.parse(row.layout)).toEqual({
      c: [[Date.UTC(2026, 10, 27), 'class-1']],
      m: [['Custom', row.messages.length, 0]],
    });
    expect(Number(row.deliveries)).toBe(1);
  });
});
