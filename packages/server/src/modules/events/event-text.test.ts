import { describe, expect, it } from 'vitest';
import { eventSpans } from './event-text.ts';
import { eventBody, toRow } from './service.ts';
import { validateEventBatch } from './validation.ts';

const SID = '0190a3c2-7b7e-7c3e-8f00-0000000000aa';
const STREAM = '0190a3c2-7b7e-7c3e-8f00-0000000000cc';
const OWN_STREAM = '0190a3c2-7b7e-7c3e-8f00-0000000000dd';
const NOW = Date.UTC(2025, 5, 1, 12, 0, 0);
const CTX = { sessionId: SID, now: NOW, maxEvents: 1000 };

const events = [
  { id: 'a', eventType: 'Health', timestamp: NOW - 5, fps: 72.5, cpuUsage: 33, batteryLevel: 81 },
  // Quotes, backslashes, brackets and whitespace inside strings are not structure.
  { id: 'b"}]\\', eventType: 'Custom', timestamp: NOW - 4, custom01: '{ [ "x" ] }\\', custom02: 'tab\there' },
  { eventType: 'Error', id: 'c', severity: 'Error', message: 'é – 😀 \u2028', timestamp: NOW - 3 },
  { id: 'd', eventType: 'Screenshot', timestamp: NOW - 2, imageId: 'i', streamingSessionId: OWN_STREAM },
];

describe('eventSpans', () => {
  it('finds each event of a compact body exactly', () => {
    const parts = events.map((e) => JSON.stringify(e));
    const text = `{"events":[${parts.join(',')}]}`;
    const spans = eventSpans(text) as number[];
    expect(spans).toHaveLength(2 * parts.length);
    for (let i = 0; i < parts.length; i++) expect(text.slice(spans[2 * i], spans[2 * i + 1])).toBe(parts[i]);
  });

  it('allows whitespace between events and around the array', () => {
    const text = `{ "events" : [\n  ${JSON.stringify(events[0])} ,\r\n\t${JSON.stringify(events[1])}\n] }\n`;
    expect(eventSpans(text)).toHaveLength(4);
  });

  it.each([
    ['a space inside an event', `{"events":[{"id": "a"}]}`],
    ['a newline inside an event', `{"events":[{"id":"a",\n"x":1}]}`],
    ['a repeated events key', `{"events":[{"id":"a"}],"events":[{"id":"b"}]}`],
    ['an object before the events array', `{"x":{"y":1},"events":[{"id":"a"}]}`],
    ['an event that is not an object', `{"events":[[1]]}`],
    ['an unterminated string', `{"events":[{"id":"a}]}`],
  ])('refuses %s', (_name, text) => {
    expect(eventSpans(text)).toBeNull();
  });
});

describe('events stored as written', () => {
  const text = `{"events":[${events.map((e) => JSON.stringify(e)).join(',')}]}`;

  it.each([
    ['no stream live', null],
    ['a stream live', STREAM],
  ])('store the same members as a serialized event, %s', (_name, stream) => {
    const checked = validateEventBatch(JSON.parse(text), CTX, text);
    if (!checked.ok) throw new Error(JSON.stringify(checked.errors));
    const target = { sessionId: SID, tenantId: 't', tenantCohortId: null, streamingSessionId: stream };
    for (const e of checked.events) {
      expect(e.text).toBeTypeOf('string');
      const row = toRow(target, e, NOW);
      expect(row.body).not.toMatch(/[\n\r]/);
      expect(JSON.parse(row.body)).toStrictEqual(JSON.parse(JSON.stringify(eventBody(target, e))));
      expect(row.streaming_session_id).toBe(e.id === 'd' ? OWN_STREAM : stream);
      // Without the text, the same row but for the body's member order.
      const serialized = toRow(target, { ...e, text: undefined }, NOW);
      expect({ ...row, body: JSON.parse(row.body) }).toStrictEqual({
        ...serialized,
        body: JSON.parse(serialized.body),
      });
    }
  });

  it('serializes an event that names its session, and every event of a body with spaces', () => {
    const own = `{"events":[{"id":"a","eventType":"Custom","timestamp":${NOW - 1},"sessionId":"${SID.toUpperCase()}"}]}`;
    const ownChecked = validateEventBatch(JSON.parse(own), CTX, own);
    expect(ownChecked.ok && ownChecked.events[0].text).toBeUndefined();
    const spaced = JSON.stringify({ events }, null, 2);
    const spacedChecked = validateEventBatch(JSON.parse(spaced), CTX, spaced);
    expect(spacedChecked.ok && spacedChecked.events.every((e) => e.text === undefined)).toBe(true);
  });
});
