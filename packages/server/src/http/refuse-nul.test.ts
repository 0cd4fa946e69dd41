import { describe, expect, it } from 'vitest';
import { refuseNul } from './validation.ts';

// The hook walks every request's params, query and body; it names the place only when there is one.
describe('refuseNul', () => {
  const request = (body: unknown, query: unknown = {}, params: unknown = {}) => ({ params, query, body });
  const refusal = async (r: ReturnType<typeof request>) => {
    try {
      await refuseNul(r);
      return null;
    } catch (err) {
      return (err as { status: number; errors: { path: string }[] }).errors[0].path;
    }
  };

  it('lets text without U+0000 through, whatever its depth or size', async () => {
    const events = Array.from({ length: 1000 }, (_, i) => ({ id: `e${i}`, tags: ['a', { b: 'c\\u0000' }] }));
    expect(await refusal(request({ events }, { q: 'x' }, { id: 'y' }))).toBeNull();
    expect(await refusal(request(undefined, Object.create(null), {}))).toBeNull();
  });

  it('names the place of U+0000 in a value, a key, an array, the query and the path', async () => {
    expect(await refusal(request({ events: [{ id: 'a' }, { id: 'b', x: 'n\u0000' }] }))).toBe('events[1].x');
    expect(await refusal(request({ events: [{ 'k\u0000': 1 }] }))).toBe('events[0].k\u0000');
    expect(await refusal(request({ a: [[['\u0000']]] }))).toBe('a[0][0][0]');
    expect(await refusal(request({}, { after: 'x\u0000' }))).toBe('query.after');
    expect(await refusal(request({}, {}, { sessionId: '\u0000' }))).toBe('path.sessionId');
  });
});
