import { describe, expect, it } from 'vitest';
import { NotedTimes } from './noted-times.ts';

describe('NotedTimes', () => {
  it('hands over the latest time of each id, grouped by time rounded to its granularity', () => {
    const notes = new NotedTimes(1000);
    notes.note('a', 1_000_100);
    notes.note('b', 1_000_900);
    notes.note('c', 1_002_000);
    notes.note('a', 1_002_500);
    expect(notes.size).toBe(3);
    expect(notes.get('a')).toBe(1_002_500);
    expect(notes.take()).toEqual(
      new Map([
        [1_000_000, ['b']],
        [1_002_000, ['a', 'c']],
      ]),
    );
    expect(notes.size).toBe(0);
  });

  it('forgets an id, and restores what a failed flush took without overwriting newer notes', () => {
    const notes = new NotedTimes();
    notes.note('x', 5);
    notes.note('y', 6);
    notes.forget('x');
    const taken = notes.take();
    expect(taken).toEqual(new Map([[6, ['y']]]));
    notes.note('y', 9);
    notes.restore(new Map([[6, ['y', 'z']]]));
    expect(notes.get('y')).toBe(9);
    expect(notes.get('z')).toBe(6);
  });
});
