import { Type } from 'typebox';
import { Count, Int32, Nullable, StringEnum, Timestamp, UrlOut, Uuid } from '../../http/schemas.ts';
import { CLIENT_EVENT_TYPES, SERVER_EVENT_TYPES } from '../events/index.ts';
import { OPERATIONAL_TYPES } from './operational.ts';

export const MESSAGE_TYPES = [
  'session.event',
  'reward.claimed',
  'reward.verified',
  'alert.triggered',
  'alert.resolved',
  'player.erased',
  ...OPERATIONAL_TYPES,
] as const;
export const EVENT_TYPES = [...CLIENT_EVENT_TYPES, ...SERVER_EVENT_TYPES] as const;
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export const MAX_URL_LENGTH = 2048;

const Url = Type.String({
  minLength: 1,
  maxLength: MAX_URL_LENGTH,
  description:
    'An http: or https: URL. Its host must resolve to public addresses only (unless the server allows private targets).',
});
const Description = Type.Union([Type.String({ maxLength: 1000 }), Type.Null()]);
const EventTypes = Type.Union([
  Type.Array(StringEnum(EVENT_TYPES), {
    minItems: 1,
    maxItems: EVENT_TYPES.length,
    uniqueItems: true,
    description: 'Only `session.event` messages for these event types. Absent or null: every event type.',
  }),
  Type.Null(),
]);
const Types = Type.Union([
  Type.Array(StringEnum(MESSAGE_TYPES), {
    minItems: 1,
    maxItems: MESSAGE_TYPES.length,
    uniqueItems: true,
    description:
      'Only these message types. Absent or null: every type except the operational ones (`webhook.endpoint.disabled`, `webhook.endpoint.recovered`), which an endpoint gets only by naming them here.',
  }),
  Type.Null(),
]);

const Batch = Type.Boolean({
  description:
    '`true`: `session.event` messages are sent in batches, up to 100 per request, as one `session.events` message `{type, timestamp, data: {events: [message, ...]}}` (one `webhook-id`, signed and retried as one). Other message types are sent one by one. Default `false`.',
});

export const CreateWebhookBody = Type.Object(
  {
    url: Url,
    description: Type.Optional(Description),
    eventTypes: Type.Optional(EventTypes),
    types: Type.Optional(Types),
    batch: Type.Optional(Batch),
  },
  { additionalProperties: false },
);

export const UpdateWebhookBody = Type.Object(
  {
    url: Type.Optional(Url),
    description: Type.Optional(Description),
    eventTypes: Type.Optional(EventTypes),
    types: Type.Optional(Types),
    batch: Type.Optional(Batch),
    enabled: Type.Optional(
      Type.Boolean({ description: '`true` re-enables an endpoint, also one the server disabled.' }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

/** A type name as stored (one of those the API took when it was set). */
const TypeName = Type.String({ pattern: '^[A-Za-z0-9_.]+$', maxLength: 64 });

const webhookFields = {
  webhookId: Uuid,
  url: UrlOut(MAX_URL_LENGTH),
  description: Description,
  eventTypes: Nullable(Type.Array(TypeName, { maxItems: EVENT_TYPES.length })),
  types: Nullable(Type.Array(TypeName, { maxItems: MESSAGE_TYPES.length })),
  batch: Type.Boolean({ description: '`session.event` messages go out in batches (`session.events`).' }),
  enabled: Type.Boolean(),
  disabledReason: Type.Union([
    StringEnum(['manual', 'failing'], {
      description:
        '`failing`: disabled by the server after nothing but failures for `LIVELINE_WEBHOOK_DISABLE_AFTER_S` (default 5 days); `manual`: disabled by `PATCH {enabled: false}`. Null while enabled.',
    }),
    Type.Null(),
  ]),
  createdAt: Timestamp(),
  updatedAt: Timestamp(),
};

export const WebhookSchema = Type.Object(webhookFields, { $id: 'Webhook' });

const Secret = Type.String({
  pattern: '^whsec_[A-Za-z0-9+/=]+$',
  maxLength: 128,
  description: 'The signing secret (`whsec_` + base64). Shown only here: store it.',
});

export const WebhookWithSecretSchema = Type.Object({ ...webhookFields, secret: Secret });

export const RotatedWebhookSchema = Type.Object({
  ...webhookFields,
  secret: Secret,
  previousSecretExpiresAt: Timestamp(
    'Until then every delivery carries a second signature, made with the previous secret.',
  ),
});

/** Longest error text of an attempt or a delivery (the sender keeps 500 characters). */
const ErrorText = Nullable(Type.String({ maxLength: 1024 }));

export const AttemptSchema = Type.Object({
  attemptedAt: Timestamp(),
  statusCode: Nullable(Int32(100, 999, 'The endpoint’s HTTP status; null when none came back.')),
  latencyMs: Count(),
  error: ErrorText,
});

export const DeliverySchema = Type.Object(
  {
    deliveryId: Type.String({
      format: 'uuid',
      maxLength: 36,
      description: 'Also the `webhook-id` header, the same on every attempt.',
    }),
    webhookId: Uuid,
    type: TypeName,
    eventType: Nullable(TypeName),
    status: StringEnum(DELIVERY_STATUSES),
    createdAt: Timestamp(),
    nextAttemptAt: Nullable(Timestamp()),
    completedAt: Nullable(Timestamp()),
    lastError: ErrorText,
    payload: Type.Unknown({
      description:
        'The body sent: `{type, timestamp, data}`; for a batch (`session.events`), `data.events` holds the `session.event` messages.',
    }),
    attempts: Type.Array(AttemptSchema, {
      description: 'Every attempt, oldest first: the schedule’s, and one more for each retry asked for.',
    }),
  },
  { $id: 'WebhookDelivery' },
);

export const DeliveriesQuery = Type.Object(
  {
    status: Type.Optional(StringEnum(DELIVERY_STATUSES)),
    after: Type.Optional(
      Type.String({ format: 'uuid', maxLength: 36, description: 'The `nextCursor` of the previous page.' }),
    ),
    limit: Type.Optional(Int32(1, 1000, 'Default 100.')),
  },
  { additionalProperties: false },
);

export const ReplayBody = Type.Object(
  {
    since: Count('Unix ms: every delivery of this endpoint created at or after it is sent again.'),
  },
  { additionalProperties: false },
);
