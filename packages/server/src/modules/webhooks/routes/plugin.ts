import type { FastifyPluginAsync } from 'fastify';
import { DeliverySchema, WebhookSchema } from '../schemas.ts';
import type { WebhooksService } from '../service.ts';
import { registerDeliveryLogRoutes, registerRedeliveryRoutes, registerTestRoute } from './deliveries.ts';
import {
  registerEndpointChangeRoutes,
  registerEndpointRoutes,
  registerSecretRotationRoute,
} from './endpoints.ts';
import { mounts } from './mount.ts';

export interface WebhooksPluginOptions {
  webhooks: WebhooksService;
}

/**
 * Webhook endpoints, secret rotation, tests and the delivery log (CONTRACT §6), mounted twice: for
 * the tenant and for the operator. The plugin starts nothing: the dispatcher is a worker of
 * `WebhooksService`, run by whoever runs the process.
 */
export const webhooksPlugin: FastifyPluginAsync<WebhooksPluginOptions> = async (app, { webhooks }) => {
  app.addSchema(WebhookSchema);
  app.addSchema(DeliverySchema);
  for (const mount of mounts(webhooks)) {
    registerEndpointRoutes(app, webhooks, mount);
    registerEndpointChangeRoutes(app, webhooks, mount);
    registerSecretRotationRoute(app, webhooks, mount);
    registerTestRoute(app, webhooks, mount);
    registerDeliveryLogRoutes(app, webhooks, mount);
    registerRedeliveryRoutes(app, webhooks, mount);
  }
};
