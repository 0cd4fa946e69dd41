// The face of the webhooks module: everything outside it imports from here only.
export type { StoredEvent, WebhookOutbox } from './outbox.ts';
export { type WebhooksPluginOptions, webhooksPlugin } from './routes/plugin.ts';
export {
  createWebhooks,
  type TenantDirectory,
  type WebhooksDeps,
  WebhooksService,
} from './service.ts';
