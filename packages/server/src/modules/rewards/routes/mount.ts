import type { FastifyRequest } from 'fastify';
import { type TObject, type TProperties, Type } from 'typebox';
import type { AuthSpec } from '../../../http/auth.ts';
import { tenantIdOf } from '../../../http/auth.ts';
import { serverBaseUrl } from '../../../http/public-url.ts';
import { Uuid } from '../../../http/schemas.ts';
import type { Rewards } from '../rewards.ts';
import type { CampaignRow, ChallengeRow } from '../store.ts';

/**
 * One mount of the campaign and challenge routes: the tenant's own (`/campaigns…`, scope
 * `campaigns:manage`) or the operator's mirror (`/admin/v1/tenants/{tenantId}/campaigns…`). Both
 * share every handler; a mount says where the routes live, who may call them and whose campaigns
 * they reach.
 */
export interface Mount {
  /** What comes before `/campaigns`: nothing, or `/admin/v1/tenants/:tenantId`. */
  base: string;
  auth: AuthSpec;
  /** Who may load a challenge's image (on the tenant mount, the tenant's device tokens too). */
  imageAuth: AuthSpec;
  tags: string[];
  /** The mount's own path parameters (the operator's `tenantId`). */
  pathParams: TProperties;
  /** The path parameters of this mount plus `extra`, as one closed object. */
  params(extra?: TProperties): TObject;
  tenantId(request: FastifyRequest): Promise<string>;
  /** The URL prefix of a challenge's `imageUrl`, up to `/campaigns`. */
  imageBase(request: FastifyRequest, tenantId: string): string;
  /**
   * A route's `operationId` on this mount, verb and noun: `listCampaigns` on the tenant's,
   * `listTenantCampaigns` on the operator's (stable: SDKs and generators name methods after it).
   */
  operationId(verb: string, noun: string): string;
}

export type RewardParams = { campaignId: string; challengeId: string; playerId: string };

/** The ids a route's path names (validated by its params schema). */
export const ids = (request: FastifyRequest) => request.params as RewardParams;

/** Lets an action route be called without a body, as if it were `{}`. */
export { noBodyIsEmptyObject as emptyBody } from '../../../http/empty-body.ts';

/** LIVELINE_PUBLIC_URL (never the Host header then), else the URL the caller reached, for `imageUrl`. */
export function serverUrl(publicUrl: string | null, request: FastifyRequest): string {
  return serverBaseUrl(publicUrl, request);
}

export function mounts(rewards: Pick<Rewards, 'requireTenant'>, publicUrl: string | null): Mount[] {
  const closed =
    (base: TProperties) =>
    (extra: TProperties = {}) =>
      Type.Object({ ...base, ...extra }, { additionalProperties: false });
  const operator = { tenantId: Uuid };
  return [
    {
      base: '',
      auth: { tenant: 'campaigns:manage' },
      imageAuth: { tenant: 'campaigns:manage', device: true },
      tags: ['campaigns'],
      pathParams: {},
      params: closed({}),
      tenantId: async (request) => tenantIdOf(request),
      imageBase: (request) => serverUrl(publicUrl, request),
      operationId: (verb, noun) => `${verb}${noun}`,
    },
    {
      base: '/admin/v1/tenants/:tenantId',
      auth: { operator: true },
      imageAuth: { operator: true },
      tags: ['admin'],
      pathParams: operator,
      params: closed(operator),
      tenantId: (request) => rewards.requireTenant((request.params as { tenantId: string }).tenantId),
      imageBase: (request, tenantId) => `${serverUrl(publicUrl, request)}/admin/v1/tenants/${tenantId}`,
      operationId: (verb, noun) => `${verb}Tenant${noun}`,
    },
  ];
}

/** The campaign the path names, of the mount's tenant (404 when not theirs). */
export async function campaignOf(rewards: Rewards, m: Mount, request: FastifyRequest): Promise<CampaignRow> {
  return rewards.campaigns.get(await m.tenantId(request), ids(request).campaignId);
}

/** The challenge the path names, in the campaign the path names. */
export async function challengeOf(
  rewards: Rewards,
  m: Mount,
  request: FastifyRequest,
): Promise<{ campaign: CampaignRow; row: ChallengeRow }> {
  const campaign = await campaignOf(rewards, m, request);
  return { campaign, row: await rewards.challenges.get(campaign, ids(request).challengeId) };
}

/** The `params` of a route on the mount's root (none on the tenant mount). */
export const rootParams = (m: Mount) => (Object.keys(m.pathParams).length > 0 ? { params: m.params() } : {});
