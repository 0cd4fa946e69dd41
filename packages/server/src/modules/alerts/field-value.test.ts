import { describe, expect, it } from 'vitest';
import { fieldsStart, fieldValue, keyOf } from './field-value.ts';

describe('fieldValue', () => {
  const bodies = [
    {
      id: 'a"timestamp":9',
      sessionId: 's',
      eventType: 'Health',
      timestamp: 1,
      fps: 72.5,
      batteryLevel: 0,
      cpuUsage: -1e-7,
    },
    { id: 'b"fps":1', eventType: 'Error', severity: 'Critical', message: 'say "severity":"Debug" \\' },
    { id: 'c', eventType: 'Custom', custom01: '\\"custom02\\":', custom02: 'é ✓ \u2028', custom03: '' },
    { id: 'd', eventType: 'Health', memoryUsage: 1e21, errorCount: 9007199254740991 },
  ];
  const fields = [
    'fps',
    'batteryLevel',
    'cpuUsage',
    'severity',
    'message',
    'custom01',
    'custom02',
    'custom03',
    'memoryUsage',
    'errorCount',
    'id',
    'nope',
  ];
  for (const body of bodies)
    it(`reads ${body.id} as JSON.parse would`, () => {
      const text = JSON.stringify(body);
      const parsed = JSON.parse(text) as Record<string, unknown>;
      for (const field of fields) {
        if (field === 'id') continue;
        expect(fieldValue(text, keyOf(field)), field).toEqual(parsed[field]);
        expect(fieldValue(text, keyOf(field), fieldsStart(text)), field).toEqual(parsed[field]);
      }
    });

  it('finds a field before the timestamp in a body stored in the client’s order', () => {
    const text = '{"sessionId":"s","fps":30,"id":"a","eventType":"Health","timestamp":1,"cpuUsage":5}';
    expect(fieldValue(text, keyOf('fps'), fieldsStart(text))).toBe(30);
    expect(fieldValue(text, keyOf('cpuUsage'), fieldsStart(text))).toBe(5);
  });
});
