import { describe, expect, it } from 'vitest';
import { FIRST_EXPANSION_ROWS, rowsToTake } from './fanout.ts';

describe('rowsToTake', () => {
  it('takes as many fan-out rows as held about 512 messages at the last expansion', () => {
    // Rows of a big ingestion group (a few hundred messages each): two at a time, as before.
    expect(rowsToTake({ rows: 2, messages: 600 }, FIRST_EXPANSION_ROWS)).toBe(2);
    expect(rowsToTake({ rows: 1, messages: 500 }, 2)).toBe(1);
    // Rows of small requests (20 events each): 26 rows at once, not 2.
    expect(rowsToTake({ rows: 2, messages: 40 }, 2)).toBe(26);
  });

  it('keeps within 1 to 32 rows, and keeps the last figure when nothing was taken', () => {
    expect(rowsToTake({ rows: 3, messages: 3 }, 2)).toBe(32);
    expect(rowsToTake({ rows: 1, messages: 5_000 }, 2)).toBe(1);
    expect(rowsToTake({ rows: 0, messages: 0 }, 7)).toBe(7);
  });
});
