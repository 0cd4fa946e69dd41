import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, freshStore, openFreshStore } from '../../test/helpers/server.ts';
import { EVENTS_TABLE } from '../modules/events/ingest.ts';
import type { Storage } from './storage.ts';

// The bulk insert every ingestion group goes through, on each store: values come back exactly as
// they went in, whatever characters they hold (PostgreSQL sends a text column's values joined by a
// separator when none holds it, as an array otherwise: both ways are taken here).
describe.each(backends)('bulk insert (%s)', (backend) => {
  const store = freshStore(backend);
  let storage: Storage;

  beforeAll(async () => {
    storage = await openFreshStore(backend, store);
  });
  afterAll(async () => {
    await storage?.close();
    await store.destroy();
  });

  /** An events row: session, id, type, timestamp, stream, received, body. */
  const row = (session: string, id: string, body: string, stream: string | null = null) => [
    session,
    id,
    'Custom',
    1_700_000_000_000,
    stream,
    1_700_000_000_001,
    body,
  ];

  async function stored(session: string) {
    return storage.db
      .selectFrom('events')
      .select(['event_id', 'streaming_session_id', 'body'])
      .where('session_id', '=', session)
      .orderBy('event_id')
      .execute();
  }

  it('keeps every character of every value, and reports which rows were new', async () => {
    const bodies = [
      '{"id":"a","text":"quotes \\" and backslashes \\\\ and {braces}, commas"}',
      '{"id":"b","text":"tab\\t newline\\n unicode é 😀 \\u0000"}',
      '', // an empty text value
      '{"id":"d","raw":"a real\nnewline and\ttab"}',
      'NULL',
      '{"id":"f","text":"a, b"}',
    ];
    const rows = bodies.map((body, i) => row('bulk-1', `e${i}`, body, i % 2 ? `stream-${i}` : null));
    const first = await storage.bulk.insertIgnoringConflicts(storage.db, EVENTS_TABLE, rows.slice(0, 2));
    expect(first).toEqual([true, true]);
    const flags = await storage.bulk.insertIgnoringConflicts(storage.db, EVENTS_TABLE, rows);
    expect(flags).toEqual([false, false, true, true, true, true]);
    expect(await stored('bulk-1')).toEqual(
      bodies.map((body, i) => ({
        event_id: `e${i}`,
        streaming_session_id: i % 2 ? `stream-${i}` : null,
        body,
      })),
    );
  });

  it('takes a value holding the separator, and a lone empty value', async () => {
    const withSeparator = '{"id":"x","text":"record\u001eseparator"}';
    expect(
      await storage.bulk.insertIgnoringConflicts(storage.db, EVENTS_TABLE, [
        row('bulk-2', 'x', withSeparator),
        row('bulk-2', 'y', '{}'),
      ]),
    ).toEqual([true, true]);
    expect(
      await storage.bulk.insertIgnoringConflicts(storage.db, EVENTS_TABLE, [row('bulk-2', 'z', '')]),
    ).toEqual([true]);
    expect(await stored('bulk-2')).toEqual([
      { event_id: 'x', streaming_session_id: null, body: withSeparator },
      { event_id: 'y', streaming_session_id: null, body: '{}' },
      { event_id: 'z', streaming_session_id: null, body: '' },
    ]);
  });
});
