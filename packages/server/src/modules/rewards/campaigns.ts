import type { Clock } from '../../clock.ts';
import type { PageRequest } from '../../http/pagination.ts';
import { problems } from '../../http/problem.ts';
import { uuidv7 } from '../../ids.ts';
import { enforceQuota } from '../../limits/quota.ts';
import { digestSecret, generateSecret } from '../../secrets.ts';
import type { Storage } from '../../storage/index.ts';
import type { CampaignInput, CampaignPatch } from './campaign-input.ts';
import type { CampaignRow } from './store.ts';
import * as store from './store.ts';

const CAMPAIGN_SECRET_PREFIX = 'lcs';

export interface CampaignsDeps {
  storage: Storage;
  clock: Clock;
  /** Key of the keyed digest of campaign secrets. */
  digestKey: Buffer;
  /** Campaigns per tenant (`LIVELINE_QUOTA_CAMPAIGNS`; 0: no quota). */
  maxCampaigns?: number;
}

/** Campaigns: their window, time zone, redemption and secret (CONTRACT §7). */
export class CampaignsService {
  constructor(private readonly deps: CampaignsDeps) {}

  private get db() {
    return this.deps.storage.db;
  }

  /** A new campaign and its secret (shown once: only its digest is stored). */
  async create(tenantId: string, input: CampaignInput): Promise<{ row: CampaignRow; secret: string }> {
    const now = this.deps.clock.now();
    const secret = generateSecret(CAMPAIGN_SECRET_PREFIX);
    const row: CampaignRow = {
      campaign_id: uuidv7(),
      tenant_id: tenantId,
      name: input.name,
      timezone: input.timezone,
      starts_at: input.startsAt,
      ends_at: input.endsAt,
      redemption: JSON.stringify(input.redemption),
      secret_digest: this.digest(secret),
      created_at: now,
      updated_at: now,
    };
    const limit = this.deps.maxCampaigns ?? 0;
    // Counted in the inserting transaction: a concurrent burst cannot pass the quota.
    await this.db.transaction().execute(async (trx) => {
      await enforceQuota(this.deps.storage, trx, {
        tenantId,
        limit,
        adding: 1,
        count: (db) => store.countCampaigns(db, tenantId),
        refuse: () => problems.quotaExceeded('campaign_quota_exceeded', 'campaigns', limit),
      });
      await store.insertCampaign(trx, row);
    });
    return { row, secret };
  }

  /** The tenant's campaign, or 404. */
  async get(tenantId: string, campaignId: string): Promise<CampaignRow> {
    const row = await store.findCampaign(this.db, tenantId, campaignId);
    if (!row) throw problems.notFound('campaign');
    return row;
  }

  list(tenantId: string, page: PageRequest) {
    return store.listCampaigns(this.db, tenantId, page);
  }

  /** Campaigns running at `now` (started or without a start, not ended), oldest first. */
  current(tenantId: string, now: number) {
    return store.currentCampaigns(this.db, tenantId, now);
  }

  /** The campaign whose secret has this digest. */
  bySecretDigest(digest: string) {
    return store.findCampaignBySecret(this.db, digest);
  }

  digest(secret: string): string {
    return digestSecret(this.deps.digestKey, secret);
  }

  async update(row: CampaignRow, patch: CampaignPatch): Promise<CampaignRow> {
    const changes: Parameters<typeof store.updateCampaign>[2] = { updated_at: this.deps.clock.now() };
    if (patch.name !== undefined) changes.name = patch.name;
    if (patch.timezone !== undefined) changes.timezone = patch.timezone;
    if (patch.startsAt !== undefined) changes.starts_at = patch.startsAt;
    if (patch.endsAt !== undefined) changes.ends_at = patch.endsAt;
    if (patch.redemption !== undefined) changes.redemption = JSON.stringify(patch.redemption);
    await store.updateCampaign(this.db, row.campaign_id, changes);
    return { ...row, ...changes };
  }

  /** A new secret; the old one stops working at once. */
  async rotateSecret(row: CampaignRow): Promise<{ row: CampaignRow; secret: string }> {
    const secret = generateSecret(CAMPAIGN_SECRET_PREFIX);
    const changes = { secret_digest: this.digest(secret), updated_at: this.deps.clock.now() };
    await store.updateCampaign(this.db, row.campaign_id, changes);
    return { row: { ...row, ...changes }, secret };
  }
}

/** Started (or no start) and not ended: `startsAt <= now < endsAt`. */
export const isCurrent = (c: CampaignRow, now: number) =>
  (c.starts_at === null || c.starts_at <= now) && (c.ends_at === null || c.ends_at > now);
