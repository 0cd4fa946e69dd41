import { Type } from 'typebox';
import { StringEnum, Uuid } from '../../http/schemas.ts';
import { CLIENT_EVENT_TYPES, SERVER_EVENT_TYPES } from '../events/index.ts';

export const MESSAGE_TYPES = ['session.event', 'reward.claimed', 'reward.verified'] as const;
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
    uniqueItems: true,
    description: 'Only `session.event` messages for these event types. Absent or null: every event type.',
  }),
  Type.Null(),
]);
const Types = Type.Union([
  Type.Array(StringEnum(MESSAGE_TYPES), {
    minItems: 1,
    uniqueItems: true,
    description: 'Only these message types. Absent or null: every type.',
  }),
  Type.Null(),
]);

export const CreateWebhookBody = Type.Object(
  {
    url: Url,
    description: Type.Optional(Description),
    eventTypes: Type.Optional(EventTypes),
    types: Type.Optional(Types),
  },
  { additionalProperties: false },
);

export const UpdateWebhookBody = Type.Object(
  {
    url: Type.Optional(Url),
    description: Type.Optional(Description),
    eventTypes: Type.Optional(EventTypes),
    types: Type.Optional(Types),
    enabled: Type.Optional(
      Type.Boolean({ description: '`true` re-enables an endpoint, also one the server disabled.' }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

const webhookFields = {
  webhookId: Uuid,
  url: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  eventTypes: Type.Union([Type.Array(Type.String()), Type.Null()]),
  types: Type.Union([Type.Array(Type.String()), Type.Null()]),
  enabled: Type.Boolean(),
  disabledReason: Type.Union([
    StringEnum(['manual', 'failing'], {
      description: '`failing`: disabled by the server after 5 days of nothing but failures.',
    }),
    Type.Null(),
  ]),
  createdAt: Type.Integer(),
  updatedAt: Type.Integer(),
};

export const WebhookSchema = Type.Object(webhookFields, { $id: 'Webhook' });

const Secret = Type.String({
  pattern: '^whsec_',
  description: 'The signing secret (`whsec_` + base64). Shown only here: store it.',
});

export const WebhookWithSecretSchema = Type.Object({ ...webhookFields, secret: Secret });

export const RotatedWebhookSchema = Type.Object({
  ...webhookFields,
  secret: Secret,
  previousSecretExpiresAt: Type.Integer({
    description: 'Until then every delivery carries a second signature, made with the previous secret.',
  }),
});

export const AttemptSchema = Type.Object({
  attemptedAt: Type.Integer(),
  statusCode: Type.Union([Type.Integer(), Type.Null()]),
  latencyMs: Type.Integer(),
  error: Type.Union([Type.String(), Type.Null()]),
});

export const DeliverySchema = Type.Object(
  {
    deliveryId: Type.String({ description: 'Also the `webhook-id` header, the same on every attempt.' }),
    webhookId: Uuid,
    type: Type.String(),
    eventType: Type.Union([Type.String(), Type.Null()]),
    status: StringEnum(DELIVERY_STATUSES),
    createdAt: Type.Integer(),
    nextAttemptAt: Type.Union([Type.Integer(), Type.Null()]),
    completedAt: Type.Union([Type.Integer(), Type.Null()]),
    lastError: Type.Union([Type.String(), Type.Null()]),
    payload: Type.Unknown({ description: 'The body sent: `{type, timestamp, data}`.' }),
    attempts: Type.Array(AttemptSchema),
  },
  { $id: 'WebhookDelivery' },
);

export const DeliveriesQuery = Type.Object(
  {
    status: Type.Optional(StringEnum(DELIVERY_STATUSES)),
    after: Type.Optional(
      Type.String({ format: 'uuid', description: 'The `nextCursor` of the previous page.' }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Default 100.' })),
  },
  { additionalProperties: false },
);

export const ReplayBody = Type.Object(
  {
    since: Type.Integer({
      minimum: 0,
      description: 'Unix ms: every delivery of this endpoint created at or after it is sent again.',
    }),
  },
  { additionalProperties: false },
);
