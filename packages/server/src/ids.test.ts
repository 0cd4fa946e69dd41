import { UUID } from 'uuidv7';
import { describe, expect, it } from 'vitest';
import { uuidv7 } from './ids.ts';

describe('uuidv7 from pooled randomness', () => {
  it('makes distinct, time-ordered version 7 UUIDs across many refills of the pool', () => {
    const ids = Array.from({ length: 5_000 }, () => uuidv7());
    for (const id of ids)
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    // The random part differs between ids made in the same millisecond (not a repeated pool).
    const tails = new Set(ids.map((id) => id.slice(-12)));
    expect(tails.size).toBe(ids.length);
  });

  it('writes the same text as the uuidv7 package for the same bytes', () => {
    for (let i = 0; i < 200; i++) {
      const id = uuidv7();
      expect(UUID.parse(id).toString()).toBe(id);
    }
  });
});
