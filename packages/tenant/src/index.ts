/** @liveline/tenant: a typed client for the liveline tenant API and webhook verification. */
export { type ClientCredentials, TokenError, TokenSource, type TokenSourceOptions } from './auth.ts';
export { createTenantClient, type TenantClient, type TenantClientOptions } from './client.ts';
export type { components, paths } from './generated/api.ts';
export { tailPath } from './tail.ts';
export {
  PRESENCE_KINDS,
  type PresenceData,
  type PresenceKind,
  TailError,
  type TailEvent,
  type TailEventMessage,
  type TailMessage,
  type TailOptions,
  type TailPresenceMessage,
  type TailTarget,
} from './tail-types.ts';
export {
  type AlertData,
  type EndpointDisabledData,
  type EndpointRecoveredData,
  type HeadersLike,
  type SessionEventData,
  verifyWebhook,
  type WebhookEndpoint,
  type WebhookMessage,
  type WebhookType,
  WebhookVerificationError,
} from './webhooks.ts';
