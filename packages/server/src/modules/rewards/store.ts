import type { Kysely, Selectable } from 'kysely';
import type { PageRequest } from '../../http/pagination.ts';
import { type Database, readPage } from '../../storage/index.ts';
import type { CampaignsTable, ChallengesTable, ClaimsTable } from '../../storage/schema.ts';

/** The rewards module's tables: `campaigns`, `challenges`, `claims`. Nothing else reads them. */

export type CampaignRow = Selectable<CampaignsTable>;
export type ChallengeRow = Omit<Selectable<ChallengesTable>, 'image'>;
export type ClaimRow = Selectable<ClaimsTable>;

type Db = Kysely<Database>;

const CHALLENGE_COLUMNS = [
  'challenge_id',
  'campaign_id',
  'tenant_id',
  'reward_code',
  'reward_title',
  'reward_requirement',
  'rule_type',
  'rule_target',
  'created_at',
  'updated_at',
] as const;

// --- campaigns ----------------------------------------------------------------------------------

export async function insertCampaign(db: Db, row: CampaignRow): Promise<void> {
  await db.insertInto('campaigns').values(row).execute();
}

/** How many campaigns the tenant has, ended ones included (the quota counts them). */
export async function countCampaigns(db: Db, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom('campaigns')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function findCampaign(db: Db, tenantId: string, campaignId: string) {
  return db
    .selectFrom('campaigns')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('campaign_id', '=', campaignId)
    .executeTakeFirst();
}

export async function findCampaignBySecret(db: Db, secretDigest: string) {
  return db.selectFrom('campaigns').selectAll().where('secret_digest', '=', secretDigest).executeTakeFirst();
}

export function listCampaigns(db: Db, tenantId: string, page: PageRequest) {
  const base = db.selectFrom('campaigns').where('tenant_id', '=', tenantId);
  return readPage(
    db,
    base,
    (b) => b.selectAll(),
    { column: 'created_at', direction: 'asc', id: 'campaign_id' },
    page,
  );
}

/** Campaigns running at `now`: started (or without a start) and not yet ended. */
export async function currentCampaigns(db: Db, tenantId: string, now: number) {
  return db
    .selectFrom('campaigns')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where((eb) => eb.or([eb('starts_at', 'is', null), eb('starts_at', '<=', now)]))
    .where((eb) => eb.or([eb('ends_at', 'is', null), eb('ends_at', '>', now)]))
    .orderBy('created_at')
    .orderBy('campaign_id')
    .execute();
}

export async function updateCampaign(
  db: Db,
  campaignId: string,
  changes: Partial<Omit<CampaignRow, 'campaign_id' | 'tenant_id' | 'created_at'>>,
): Promise<void> {
  await db.updateTable('campaigns').set(changes).where('campaign_id', '=', campaignId).execute();
}

// --- challenges ---------------------------------------------------------------------------------

export async function insertChallenges(db: Db, rows: Selectable<ChallengesTable>[]): Promise<void> {
  // Each row carries an image of up to 1 MiB: one statement per row keeps statements small.
  for (const row of rows) await db.insertInto('challenges').values(row).execute();
}

/** How many challenges the tenant has over all its campaigns (through the campaigns' index). */
export async function countChallenges(db: Db, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom('challenges')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where(
      'campaign_id',
      'in',
      db.selectFrom('campaigns').select('campaign_id').where('tenant_id', '=', tenantId),
    )
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function findChallenge(db: Db, tenantId: string, challengeId: string) {
  return db
    .selectFrom('challenges')
    .select(CHALLENGE_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('challenge_id', '=', challengeId)
    .executeTakeFirst();
}

export async function challengeImage(db: Db, tenantId: string, campaignId: string, challengeId: string) {
  return db
    .selectFrom('challenges')
    .select(['image', 'updated_at'])
    .where('tenant_id', '=', tenantId)
    .where('campaign_id', '=', campaignId)
    .where('challenge_id', '=', challengeId)
    .executeTakeFirst();
}

export async function rewardCodesTaken(db: Db, campaignId: string, codes: string[]): Promise<Set<string>> {
  if (codes.length === 0) return new Set();
  const taken = new Set<string>();
  // In slices, to stay far below any bound-parameter limit.
  for (let i = 0; i < codes.length; i += 500) {
    const rows = await db
      .selectFrom('challenges')
      .select('reward_code')
      .where('campaign_id', '=', campaignId)
      .where('reward_code', 'in', codes.slice(i, i + 500))
      .execute();
    for (const r of rows) taken.add(r.reward_code);
  }
  return taken;
}

export function listChallenges(db: Db, campaignId: string, page: PageRequest) {
  const base = db.selectFrom('challenges').where('campaign_id', '=', campaignId);
  const order = { column: 'created_at', direction: 'asc', id: 'challenge_id' } as const;
  return readPage(db, base, (b) => b.select(CHALLENGE_COLUMNS), order, page);
}

/** Every challenge of the given campaigns, in campaign order, then creation order. */
export async function challengesOf(db: Db, campaignIds: string[]): Promise<ChallengeRow[]> {
  if (campaignIds.length === 0) return [];
  const rows = await db
    .selectFrom('challenges')
    .select(CHALLENGE_COLUMNS)
    .where('campaign_id', 'in', campaignIds)
    .orderBy('created_at')
    .orderBy('challenge_id')
    .execute();
  const rank = new Map(campaignIds.map((id, i) => [id, i]));
  return rows.sort((a, b) => rank.get(a.campaign_id)! - rank.get(b.campaign_id)!);
}

export async function updateChallenge(
  db: Db,
  challengeId: string,
  changes: Partial<
    Omit<Selectable<ChallengesTable>, 'challenge_id' | 'campaign_id' | 'tenant_id' | 'created_at'>
  >,
): Promise<void> {
  await db.updateTable('challenges').set(changes).where('challenge_id', '=', challengeId).execute();
}

/** Deletes the challenge only while nobody has claimed it; false when a claim exists. */
export async function deleteUnclaimedChallenge(db: Db, challengeId: string): Promise<boolean> {
  const result = await db
    .deleteFrom('challenges')
    .where('challenge_id', '=', challengeId)
    .where((eb) =>
      eb.not(
        eb.exists(eb.selectFrom('claims').select('claim_id').where('claims.challenge_id', '=', challengeId)),
      ),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

// --- claims -------------------------------------------------------------------------------------

export async function hasClaims(db: Db, challengeId: string): Promise<boolean> {
  const row = await db
    .selectFrom('claims')
    .select('claim_id')
    .where('challenge_id', '=', challengeId)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

export async function findClaim(db: Db, challengeId: string, playerId: string) {
  return db
    .selectFrom('claims')
    .selectAll()
    .where('challenge_id', '=', challengeId)
    .where('player_id', '=', playerId)
    .executeTakeFirst();
}

/** The player's claims on the given challenges, by challenge id. */
export async function claimsOfPlayer(db: Db, tenantId: string, playerId: string, challengeIds: string[]) {
  const out = new Map<string, ClaimRow>();
  for (let i = 0; i < challengeIds.length; i += 500) {
    const rows = await db
      .selectFrom('claims')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('player_id', '=', playerId)
      .where('challenge_id', 'in', challengeIds.slice(i, i + 500))
      .execute();
    for (const r of rows) out.set(r.challenge_id, r);
  }
  return out;
}

export async function insertClaim(db: Db, row: Omit<ClaimRow, 'claim_id'>): Promise<ClaimRow> {
  return db.insertInto('claims').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function findClaimByCode(
  db: Db,
  campaignId: string,
  code: { kind: 'display' | 'achievement'; code: string },
) {
  return db
    .selectFrom('claims')
    .selectAll()
    .where(code.kind === 'display' ? 'display_code' : 'achievement_code', '=', code.code)
    .where('campaign_id', '=', campaignId)
    .executeTakeFirst();
}

/** Sets `verified_at` unless already set; true when this call set it. */
export async function markVerified(db: Db, claimId: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('claims')
    .set({ verified_at: now })
    .where('claim_id', '=', claimId)
    .where('verified_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function findClaimById(db: Db, claimId: number) {
  return db.selectFrom('claims').selectAll().where('claim_id', '=', claimId).executeTakeFirstOrThrow();
}

/** A player's claims in claim id order after `afterId`, at most `limit` (`claims_player`, then sorted). */
export function playerClaimsPage(db: Db, tenantId: string, playerId: string, afterId: number, limit: number) {
  return db
    .selectFrom('claims')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('player_id', '=', playerId)
    .where('claim_id', '>', afterId)
    .orderBy('claim_id')
    .limit(limit)
    .execute();
}

/**
 * Erasure: up to `limit` of the player's claims lose their player (null); the claim, its reward and
 * codes stay, so a code handed out still verifies. How many changed.
 */
export async function forgetClaimsPlayer(db: Db, tenantId: string, playerId: string, limit: number) {
  const ids = (
    await db
      .selectFrom('claims')
      .select('claim_id')
      .where('tenant_id', '=', tenantId)
      .where('player_id', '=', playerId)
      .limit(limit)
      .execute()
  ).map((r) => r.claim_id);
  if (ids.length === 0) return 0;
  await db.updateTable('claims').set({ player_id: null }).where('claim_id', 'in', ids).execute();
  return ids.length;
}
