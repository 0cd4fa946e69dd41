import { describe, expect, it } from 'vitest';
import { NotedTimes } from './noted-times.ts';

describe('NotedTimes', () => {
  it('hands over the latest time of each id, grouped by time rounded to its granularity', async () => {
    const notes = new NotedTimes(1000);
    notes.note('a', 1_000_100);
    notes.note('b', 1_000_900);
    notes.note('c', 1_002_000);
    notes.note('a', 1_002_500);
    expect(notes.size).toBe(3);
    expect(notes.get('a')).toBe(1_002_500);
    let given: Map<number, string[]> | undefined;
    expect(
      await notes.flush(async (byTime) => {
        given = byTime;
      }),
    ).toBe(3);
    expect(given).toEqual(
      new Map([
        [1_000_000, ['b']],
        [1_002_000, ['a', 'c']],
      ]),
    );
    expect(notes.size).toBe(0);
    expect(notes.get('a')).toBeUndefined();
  });

  it('keeps what a flush is writing readable until the write is done', async () => {
    const notes = new NotedTimes();
    notes.note('x', 5);
    let finish = () => {};
    const flushing = notes.flush(() => new Promise<void>((resolve) => (finish = resolve)));
    expect(notes.size).toBe(0);
    expect(notes.get('x')).toBe(5);
    notes.note('y', 7);
    finish();
    await flushing;
    expect(notes.get('x')).toBeUndefined();
    expect(notes.get('y')).toBe(7);
    expect(notes.size).toBe(1);
  });

  it('forgets an id, and notes again what a failed flush took without overwriting newer notes', async () => {
    const notes = new NotedTimes();
    notes.note('x', 5);
    notes.note('y', 6);
    notes.note('z', 6);
    notes.forget('x');
    const failing = notes.flush(async (byTime) => {
      expect(byTime).toEqual(new Map([[6, ['y', 'z']]]));
      notes.note('y', 9);
      throw new Error('store down');
    });
    await expect(failing).rejects.toThrow('store down');
    expect(notes.get('y')).toBe(9);
    expect(notes.get('z')).toBe(6);
    expect(notes.get('x')).toBeUndefined();
    expect(notes.size).toBe(2);
  });
});
