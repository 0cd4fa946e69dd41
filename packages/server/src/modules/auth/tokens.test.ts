import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../clock.ts';
import { openStorage, type Storage } from '../../storage/index.ts';
import { KeyRing } from './keys.ts';
import { TokenService } from './tokens.ts';

describe('TokenService: the cache of verified tokens', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-tokens-'));
  let storage: Storage;
  let keys: KeyRing;

  beforeAll(async () => {
    storage = await openStorage({
      databaseUrl: null,
      databaseSchema: 'public',
      dataDir,
      sqliteSynchronous: 'NORMAL',
    });
    keys = await KeyRing.open(storage, null, systemClock);
  });
  afterAll(async () => {
    await storage?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const issue = (tokens: TokenService, n: number) =>
    Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const { token } = await tokens.issueDeviceToken({
          tenantId: 't',
          playerId: `player-${i}`,
          tenantCohortId: null,
          clientId: 'c',
          ttlSeconds: 600,
        });
        return token;
      }),
    );

  it('keeps the tokens used lately: a token used again after it fell into the older half outlives newer ones', async () => {
    const tokens = new TokenService(keys, 'urn:test', systemClock, 10);
    const t = await issue(tokens, 12);
    for (const token of t.slice(0, 10)) expect(await tokens.verify(token)).not.toBeNull();
    for (const token of t.slice(0, 10)) expect(tokens.remembered(token)?.kind).toBe('device');
    // t[0] is the oldest and in the older half: used, it moves to the young end. t[9] is young: it stays.
    expect(tokens.remembered(t[0])).not.toBeNull();
    // Two new tokens evict the two oldest: t[1] and t[2], not t[0].
    await tokens.verify(t[10]);
    await tokens.verify(t[11]);
    expect(tokens.remembered(t[1])).toBeNull();
    expect(tokens.remembered(t[2])).toBeNull();
    for (const i of [0, 3, 9, 10, 11]) expect(tokens.remembered(t[i])).not.toBeNull();
    // An evicted token still verifies, by its signature, and is kept again.
    expect((await tokens.verify(t[1]))?.kind).toBe('device');
    expect(tokens.remembered(t[1])).not.toBeNull();
  });
});
