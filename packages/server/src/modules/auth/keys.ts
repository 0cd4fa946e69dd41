import { createHash, randomBytes } from 'node:crypto';
import { type CryptoKey, exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import type { Clock } from '../../clock.ts';
import { uuidv7 } from '../../ids.ts';
import type { Storage } from '../../storage/index.ts';

export const SIGNING_ALG = 'ES256';

/**
 * The longest a token the server issues can live: device tokens take `ttlSeconds` up to 30 days
 * (`LIVELINE_DEVICE_TOKEN_TTL_S` has the same bound; access tokens live at most a day). A signing key
 * that stopped signing verifies this long after, and is then dropped.
 */
export const MAX_TOKEN_LIFETIME_S = 30 * 86400;
/**
 * Added to that: a process that picks a rotation up late (the bus is down; it learns at its next
 * refresh, `AUTH_REFRESH_MS`) may sign with the old key a little longer, and clocks differ.
 */
const RETIREMENT_MARGIN_MS = 10 * 60_000;
/** A token with a `kid` this process does not know reloads the keys at most this often. */
const UNKNOWN_KID_RELOAD_MS = 1000;

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

/** A signing key as the operator sees it (`GET /admin/v1/keys`); never its private part. */
export interface KeyInfo {
  kid: string;
  createdAt: number;
  /** True for the one key new tokens are signed with (the newest). */
  signing: boolean;
  /** When an older key stops verifying and is deleted (null for the signing key). */
  retiresAt: number | null;
}

interface KeyRow {
  kid: string;
  material: string;
  created_at: number;
}

interface Loaded {
  signing: SigningKey;
  verifying: Map<string, { key: CryptoKey; retiresAt: number | null }>;
  jwks: { keys: JWK[] };
  infos: KeyInfo[];
}

/**
 * The server's keys, kept in the database (table `server_keys`) so every process of a deployment
 * signs, verifies and digests alike: the digest key of client and campaign secrets, and the ES256
 * signing keys. The newest signing key signs (its `kid` in every token's header); each older one keeps
 * verifying until `MAX_TOKEN_LIFETIME_S` (plus a margin) after the key that replaced it was made, and
 * is then deleted. `rotate()` adds a key; `reload()` reads them again (the bus asks every process to
 * after a rotation, a refresh job every `AUTH_REFRESH_MS`, and a token with an unknown `kid` at most
 * once a second).
 */
export class KeyRing {
  private loaded: Loaded;
  private reloading: Promise<boolean> | null = null;
  private lastReloadAt = 0;

  private constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    /** Key for the keyed digests of client and campaign secrets. */
    readonly digestKey: Buffer,
    loaded: Loaded,
  ) {
    this.loaded = loaded;
  }

  /**
   * Loads the keys, creating the digest key and a first signing key on first start. Two processes
   * racing on first start may each insert a signing key: the newer signs, and the other process
   * switches to it when it first sees a token signed with it (unknown `kid`) or at its next refresh.
   */
  static async open(storage: Storage, configuredSecretKey: string | null, clock: Clock): Promise<KeyRing> {
    const digestKey = await loadDigestKey(storage, configuredSecretKey, clock.now());
    let rows = await signingRows(storage);
    if (rows.length === 0) {
      await insertSigningKey(storage, clock.now());
      rows = await signingRows(storage);
    }
    const loaded = await build(rows, null, clock.now());
    return new KeyRing(storage, clock, digestKey, loaded);
  }

  /** The key new tokens are signed with. */
  get signing(): SigningKey {
    return this.loaded.signing;
  }

  /** Every key that verifies tokens, as published at `/.well-known/jwks.json`. */
  get jwks(): { keys: JWK[] } {
    return { keys: this.loaded.jwks.keys.filter((jwk) => this.verifies(String(jwk.kid))) };
  }

  /** The signing keys that verify, newest last. */
  list(): KeyInfo[] {
    return this.loaded.infos.filter((info) => this.verifies(info.kid));
  }

  /** True while the key `kid` verifies (a token verified earlier stops when its key is dropped). */
  verifies(kid: string): boolean {
    const entry = this.loaded.verifying.get(kid);
    return entry !== undefined && (entry.retiresAt === null || entry.retiresAt > this.clock.now());
  }

  /**
   * The public key of `kid`, or null. An unknown `kid` may be a key another process just made: the
   * keys are read again, at most once a second (so a stream of made-up ids costs one query a second).
   */
  async verifierFor(kid: string): Promise<CryptoKey | null> {
    if (this.verifies(kid)) return this.loaded.verifying.get(kid)!.key;
    if (this.loaded.verifying.has(kid)) return null; // retired
    if (this.reloading) await this.reloading;
    else if (performance.now() - this.lastReloadAt >= UNKNOWN_KID_RELOAD_MS) await this.reload();
    return this.verifies(kid) ? this.loaded.verifying.get(kid)!.key : null;
  }

  /** Reads the signing keys again; true when they changed. Concurrent calls share one read. */
  reload(): Promise<boolean> {
    if (!this.reloading) {
      this.reloading = (async () => {
        try {
          const rows = await signingRows(this.storage);
          const now = this.clock.now();
          const before = this.loaded.infos.map((k) => `${k.kid}:${k.retiresAt}`).join(' ');
          const next = await build(rows, this.loaded, now);
          const changed = next.infos.map((k) => `${k.kid}:${k.retiresAt}`).join(' ') !== before;
          if (changed) this.loaded = next;
          return changed;
        } finally {
          this.lastReloadAt = performance.now();
          this.reloading = null;
        }
      })();
    }
    return this.reloading;
  }

  /**
   * Makes a new signing key, which signs from now on. The others keep verifying until they retire;
   * with `retireOthers` (a key leaked) they are deleted at once and every token they signed fails.
   * Keys past retirement are deleted. Returns the new key.
   */
  async rotate(options: { retireOthers?: boolean } = {}): Promise<KeyInfo> {
    const newest = this.loaded.infos.at(-1)?.createdAt ?? 0;
    // Strictly newer than every key, whatever the clocks of the processes that made them.
    const kid = await insertSigningKey(this.storage, Math.max(this.clock.now(), newest + 1));
    if (options.retireOthers) {
      await this.storage.db
        .deleteFrom('server_keys')
        .where('purpose', '=', 'signing')
        .where('kid', '!=', kid)
        .execute();
    }
    await this.prune();
    // A reload under way may have read the rows before the insert: read them once more.
    await this.reloading;
    await this.reload();
    return this.loaded.infos.find((k) => k.kid === kid)!;
  }

  /** Deletes the signing keys past retirement. */
  async prune(): Promise<void> {
    const now = this.clock.now();
    const rows = await signingRows(this.storage);
    const retired = retirements(rows)
      .filter(({ retiresAt }) => retiresAt !== null && retiresAt <= now)
      .map(({ row }) => row.kid);
    if (retired.length > 0)
      await this.storage.db
        .deleteFrom('server_keys')
        .where('purpose', '=', 'signing')
        .where('kid', 'in', retired)
        .execute();
  }
}

async function loadDigestKey(storage: Storage, configuredSecretKey: string | null, now: number) {
  if (configuredSecretKey) return createHash('sha256').update(configuredSecretKey, 'utf8').digest();
  await storage.db
    .insertInto('server_keys')
    .values({
      kid: 'digest-1',
      purpose: 'digest',
      material: randomBytes(32).toString('base64'),
      created_at: now,
    })
    .onConflict((oc) => oc.column('kid').doNothing())
    .execute();
  const row = await storage.db
    .selectFrom('server_keys')
    .select('material')
    .where('kid', '=', 'digest-1')
    .executeTakeFirstOrThrow();
  return Buffer.from(row.material, 'base64');
}

async function insertSigningKey(storage: Storage, createdAt: number): Promise<string> {
  const { privateKey, publicKey } = await generateKeyPair(SIGNING_ALG, { extractable: true });
  const kid = uuidv7();
  const material = JSON.stringify({
    privateJwk: await exportJWK(privateKey),
    publicJwk: await exportJWK(publicKey),
  });
  await storage.db
    .insertInto('server_keys')
    .values({ kid, purpose: 'signing', material, created_at: createdAt })
    .execute();
  return kid;
}

function signingRows(storage: Storage): Promise<KeyRow[]> {
  return storage.db
    .selectFrom('server_keys')
    .select(['kid', 'material', 'created_at'])
    .where('purpose', '=', 'signing')
    .orderBy('created_at')
    .orderBy('kid')
    .execute();
}

/** Each key with its retirement: the next key's creation plus the longest token lifetime and a margin. */
function retirements(rows: KeyRow[]) {
  return rows.map((row, i) => {
    const next = rows[i + 1];
    const retiresAt =
      next === undefined
        ? null
        : Number(next.created_at) + MAX_TOKEN_LIFETIME_S * 1000 + RETIREMENT_MARGIN_MS;
    return { row, retiresAt };
  });
}

/** The key set of these rows; keys already imported in `previous` are reused, not imported again. */
async function build(rows: KeyRow[], previous: Loaded | null, now: number): Promise<Loaded> {
  const verifying = new Map<string, { key: CryptoKey; retiresAt: number | null }>();
  const jwks: JWK[] = [];
  const infos: KeyInfo[] = [];
  let signing: SigningKey | null = null;
  for (const { row, retiresAt } of retirements(rows)) {
    if (retiresAt !== null && retiresAt <= now) continue;
    const { privateJwk, publicJwk } = JSON.parse(row.material) as { privateJwk: JWK; publicJwk: JWK };
    const published: JWK = { ...publicJwk, kid: row.kid, alg: SIGNING_ALG, use: 'sig' };
    const known = previous?.verifying.get(row.kid)?.key;
    verifying.set(row.kid, {
      key: known ?? ((await importJWK(published, SIGNING_ALG)) as CryptoKey),
      retiresAt,
    });
    jwks.push(published);
    infos.push({ kid: row.kid, createdAt: Number(row.created_at), signing: retiresAt === null, retiresAt });
    if (retiresAt === null) {
      signing =
        previous?.signing.kid === row.kid
          ? previous.signing
          : {
              kid: row.kid,
              privateKey: (await importJWK(privateJwk, SIGNING_ALG)) as CryptoKey,
              publicJwk: published,
            };
    }
  }
  if (!signing) throw new Error('no signing key could be loaded');
  return { signing, verifying, jwks: { keys: jwks }, infos };
}
