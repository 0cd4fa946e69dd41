import type { FastifyRequest } from 'fastify';
import { type TObject, type TSchema, Type } from 'typebox';
import type { AuthSpec } from '../../../http/auth.ts';
import { tenantOf } from '../../../http/auth.ts';
import { Uuid } from '../../../http/schemas.ts';
import type { WebhooksService } from '../service.ts';

/**
 * One mount of the webhook routes: the tenant's own (`/webhooks`, scope `webhooks:manage`) or the
 * operator's mirror (`/admin/v1/tenants/{tenantId}/webhooks`). Both share every handler; a mount
 * only says where the routes live, who may call them and whose endpoints they reach.
 */
export interface Mount {
  prefix: string;
  auth: AuthSpec;
  tags: string[];
  /** The path parameters of this mount plus `extra`, as one closed object. */
  params(extra?: Record<string, TSchema>): TObject;
  tenantId(request: FastifyRequest): Promise<string>;
  /**
   * A route's `operationId` on this mount, verb and noun: `listWebhooks` on the tenant's,
   * `listTenantWebhooks` on the operator's (stable: SDKs and generators name methods after it).
   */
  operationId(verb: string, noun: string): string;
}

export type WebhookParams = { webhookId: string; deliveryId: string };

/** The ids a route's path names (validated by its params schema). */
export const ids = (request: FastifyRequest) => request.params as WebhookParams;

/** Bodies of the action routes: none, or `{}`. */
export const NoBody = Type.Object({}, { additionalProperties: false, description: 'No body (or `{}`).' });

/** Lets an action route be called without a body, as if it were `{}`. */
export { noBodyIsEmptyObject as emptyBody } from '../../../http/empty-body.ts';

function closed(base: Record<string, TSchema>) {
  return (extra: Record<string, TSchema> = {}) =>
    Type.Object({ ...base, ...extra }, { additionalProperties: false });
}

export function mounts(webhooks: Pick<WebhooksService, 'requireTenant'>): Mount[] {
  return [
    {
      prefix: '/webhooks',
      auth: { tenant: 'webhooks:manage' },
      tags: ['webhooks'],
      params: closed({}),
      tenantId: async (request) => tenantOf(request).tenantId,
      operationId: (verb, noun) => `${verb}${noun}`,
    },
    {
      prefix: '/admin/v1/tenants/:tenantId/webhooks',
      auth: { operator: true },
      tags: ['admin'],
      params: closed({ tenantId: Uuid }),
      tenantId: (request) => webhooks.requireTenant((request.params as { tenantId: string }).tenantId),
      operationId: (verb, noun) => `${verb}Tenant${noun}`,
    },
  ];
}
