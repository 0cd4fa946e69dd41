/**
 * The event types of CONTRACT §2 and §5 live in `@liveline/protocol`; this module takes them from
 * there. `validation.ts` compiles one validator per client type from these schemas, and the routes
 * publish `EventSchema`/`EventBatchSchema` in /openapi.json.
 */
export {
  BusinessEventSchema,
  CLIENT_EVENT_SCHEMAS,
  CLIENT_EVENT_TYPES,
  type ClientEventType,
  CustomEventSchema,
  DEFAULT_MAX_EVENTS_PER_BATCH,
  DESIGN_EVENT_ID_PATTERN,
  DesignEventSchema,
  ERROR_SEVERITIES,
  ErrorEventSchema,
  EventBatchSchema,
  EventSchema,
  FLOW_TYPES,
  HealthEventSchema,
  ImpressionEventSchema,
  ISO_4217_PATTERN,
  MAX_ERROR_MESSAGE_LENGTH,
  MAX_EVENT_FUTURE_MS,
  MAX_EVENT_STRING_LENGTH,
  MIN_EVENT_TIMESTAMP,
  PROGRESSION_STATUSES,
  ProgressionEventSchema,
  ResourceEventSchema,
  ScreenshotEventSchema,
  SERVER_EVENT_SCHEMAS,
  SERVER_EVENT_TYPES,
  type ServerEventType,
  SessionEndEventSchema,
} from '@liveline/protocol';
