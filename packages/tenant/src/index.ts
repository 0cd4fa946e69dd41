/** @liveline/tenant: a typed client for the liveline tenant API and webhook verification. */
export { type ClientCredentials, TokenError, TokenSource, type TokenSourceOptions } from './auth.ts';
export { createTenantClient, type TenantClient, type TenantClientOptions } from './client.ts';
export type { components, paths } from './generated/api.ts';
export {
  type HeadersLike,
  type SessionEventData,
  verifyWebhook,
  type WebhookEndpoint,
  type WebhookMessage,
  type WebhookType,
  WebhookVerificationError,
} from './webhooks.ts';
