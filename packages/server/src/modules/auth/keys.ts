import { createHash, randomBytes } from 'node:crypto';
import { type CryptoKey, exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import { uuidv7 } from 'uuidv7';
import type { Storage } from '../../storage/index.ts';

export const SIGNING_ALG = 'ES256';

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export interface ServerKeys {
  /** Key for the keyed digests of client and campaign secrets. */
  digestKey: Buffer;
  /** The key new tokens are signed with (the oldest stored one). */
  signing: SigningKey;
  /** Every public key that verifies tokens, as published at /.well-known/jwks.json. */
  verifying: Map<string, CryptoKey>;
  jwks: { keys: JWK[] };
}

/**
 * Loads the server's keys from the database, creating them on first start. Keys live in the
 * database (not a local file) so that every process of a deployment signs and digests alike.
 * Two processes racing on first start may each insert a signing key: both then verify, and the
 * oldest signs.
 */
export async function loadServerKeys(storage: Storage, configuredSecretKey: string | null, now: number) {
  const { db } = storage;
  let digestKey: Buffer;
  if (configuredSecretKey) {
    digestKey = createHash('sha256').update(configuredSecretKey, 'utf8').digest();
  } else {
    await db
      .insertInto('server_keys')
      .values({
        kid: 'digest-1',
        purpose: 'digest',
        material: randomBytes(32).toString('base64'),
        created_at: now,
      })
      .onConflict((oc) => oc.column('kid').doNothing())
      .execute();
    const row = await db
      .selectFrom('server_keys')
      .select('material')
      .where('kid', '=', 'digest-1')
      .executeTakeFirstOrThrow();
    digestKey = Buffer.from(row.material, 'base64');
  }

  let rows = await signingRows(storage);
  if (rows.length === 0) {
    const { privateKey, publicKey } = await generateKeyPair(SIGNING_ALG, { extractable: true });
    const kid = uuidv7();
    const material = JSON.stringify({
      privateJwk: await exportJWK(privateKey),
      publicJwk: await exportJWK(publicKey),
    });
    await db
      .insertInto('server_keys')
      .values({ kid, purpose: 'signing', material, created_at: now })
      .execute();
    rows = await signingRows(storage);
  }

  const verifying = new Map<string, CryptoKey>();
  const jwks: JWK[] = [];
  let signing: SigningKey | null = null;
  for (const row of rows) {
    const { privateJwk, publicJwk } = JSON.parse(row.material) as { privateJwk: JWK; publicJwk: JWK };
    const published: JWK = { ...publicJwk, kid: row.kid, alg: SIGNING_ALG, use: 'sig' };
    verifying.set(row.kid, (await importJWK(published, SIGNING_ALG)) as CryptoKey);
    jwks.push(published);
    if (!signing) {
      signing = {
        kid: row.kid,
        privateKey: (await importJWK(privateJwk, SIGNING_ALG)) as CryptoKey,
        publicJwk: published,
      };
    }
  }
  if (!signing) throw new Error('no signing key could be loaded');
  return { digestKey, signing, verifying, jwks: { keys: jwks } } satisfies ServerKeys;
}

function signingRows(storage: Storage) {
  return storage.db
    .selectFrom('server_keys')
    .select(['kid', 'material'])
    .where('purpose', '=', 'signing')
    .orderBy('created_at')
    .orderBy('kid')
    .execute();
}
