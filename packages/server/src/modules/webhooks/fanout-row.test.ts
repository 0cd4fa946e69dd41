import { describe, expect, it } from 'vitest';
import { encodeFanout, FanoutWriter, itemsOf, messageOf, messagesOf } from './fanout-row.ts';

const at = Date.UTC(2026, 10, 27, 20, 16, 2, 123);
const event = (id: string, extra = '') => `{"sessionId":"s-1","id":"${id}","eventType":"Custom"${extra}}`;

describe('fan-out rows', () => {
  it("builds each message at expansion as ingestion used to write it: head, the event's members, the cohort", () => {
    const writer = new FanoutWriter();
    writer.add('Custom', event('a'), [at, 'class-7']);
    writer.add('Health', event('b', ',"note":"é \\" \u2028"'), [at, null]);
    writer.add('Custom', event('c'), [at + 1, 'class-7']);
    const row = writer.finish();
    // The row holds the events' texts only, once each; the three messages share two contexts' parts.
    expect(row.messages).toBe(event('a') + event('b', ',"note":"é \\" \u2028"') + event('c'));
    expect(JSON.parse(row.layout).c).toEqual([
      [at, 'class-7'],
      [at, null],
      [at + 1, 'class-7'],
    ]);
    const messages = messagesOf(row);
    expect(messages.map(([type]) => type)).toEqual(['Custom', 'Health', 'Custom']);
    expect(messages[0][1]).toBe(
      `{"type":"session.event","timestamp":"2026-11-27T20:16:02.123Z","data":{"sessionId":"s-1","id":"a","eventType":"Custom","tenantCohortId":"class-7"}}`,
    );
    const parsed = messages.map(([, m]) => JSON.parse(m));
    expect(parsed[1]).toEqual({
      type: 'session.event',
      timestamp: '2026-11-27T20:16:02.123Z',
      data: { sessionId: 's-1', id: 'b', eventType: 'Custom', note: 'é " \u2028', tenantCohortId: null },
    });
    expect(parsed[2].timestamp).toBe('2026-11-27T20:16:02.124Z');
  });

  it('reads rows written before (whole messages, `[[eventType, length], …]`) and keeps them whole when rewritten', () => {
    const old = ['{"type":"session.event","data":{"id":"x"}}', '{"type":"session.event","data":{"id":"yé"}}'];
    const row = { messages: old.join(''), layout: JSON.stringify(old.map((m) => ['Custom', m.length])) };
    expect(messagesOf(row)).toEqual(old.map((m) => ['Custom', m]));
    const items = itemsOf(row);
    expect(items.every((i) => i.context === null)).toBe(true);
    // An erasure rewrites a row from the items it keeps: the same messages come out of it.
    const mixed = [items[1], { eventType: 'Custom', text: event('z'), context: [at, null] as const }];
    expect(messagesOf(encodeFanout(mixed))).toEqual([
      ['Custom', old[1]],
      ['Custom', messageOf(mixed[1])],
    ]);
  });

  it('refuses a row whose layout does not match its text', () => {
    const row = new FanoutWriter();
    row.add('Custom', event('a'), [at, null]);
    const { messages, layout } = row.finish();
    expect(() => itemsOf({ messages: `${messages}x`, layout })).toThrow(/layout does not match/);
  });
});
