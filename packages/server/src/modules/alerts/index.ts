export type { EndedSession, SessionLookup, StoredEvents } from './evaluator.ts';
export { type AlertsPluginOptions, alertsPlugin } from './routes.ts';
export { type AlertsOptions, AlertsService } from './service.ts';
