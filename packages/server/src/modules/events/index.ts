export {
  CLIENT_EVENT_TYPES,
  DEFAULT_MAX_EVENTS_PER_BATCH,
  EventSchema,
  SERVER_EVENT_TYPES,
} from './event-types.ts';
export type {
  AfterCommit,
  EventRow,
  IngestResult,
  SessionEndHandler,
  StoredGroup,
  StoredSession,
} from './ingest.ts';
export { EVENTS_TABLE } from './ingest.ts';
export {
  EVENT_SWEEP_BATCH,
  EventRetention,
  eventRetentionJob,
  type RetentionDirectory,
  type RetentionHook,
  type SweepResult,
} from './retention.ts';
export { type EventsPluginOptions, eventsPlugin, type SessionFinder } from './routes.ts';
export {
  type EventSession,
  type EventSource,
  EventsService,
  type EventTarget,
  eventBody,
  type StoredHook,
  type StreamResolver,
} from './service.ts';
