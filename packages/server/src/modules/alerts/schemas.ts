import { Type } from 'typebox';
import { Count, Nullable, StringEnum, Timestamp, Uuid } from '../../http/schemas.ts';
import { CohortId } from '../sessions/index.ts';
import { ALERT_EVENT_TYPES, OPS } from './rules.ts';

/** Longest a rule's `forSeconds` may be: a day. */
export const MAX_FOR_SECONDS = 86_400;
/** Longest a rule's `cooldownSeconds` may be: a week. */
export const MAX_COOLDOWN_SECONDS = 604_800;
export const DEFAULT_COOLDOWN_SECONDS = 300;

const Name = Type.String({
  minLength: 1,
  maxLength: 200,
  description: 'What the alert is called in its messages.',
});
const EventType = Type.String({
  minLength: 1,
  maxLength: 64,
  description: `The event type the rule watches: ${ALERT_EVENT_TYPES.join(', ')}.`,
});
const Field = Type.String({
  minLength: 1,
  maxLength: 64,
  description:
    'A field of that event type (e.g. `batteryLevel` of `Health`); a wrong one is a 400 naming the allowed fields.',
});
const Op = StringEnum(OPS, {
  description: '`lt`, `lte`, `gt`, `gte` apply to numeric fields; `eq` and `neq` to every field.',
});
const Value = Type.Union(
  [
    Type.Number({ description: 'For a numeric field.' }),
    Type.String({
      maxLength: 1024,
      description: 'For a text field; for an enumerated one, one of its values.',
    }),
  ],
  { description: 'What the field is compared with.' },
);
const ForSeconds = Type.Integer({
  format: 'int32',
  minimum: 0,
  maximum: MAX_FOR_SECONDS,
  description:
    'How long (event time) the condition must hold in a session before it triggers: from the first matching event to a later one, with no non-matching event between. Default 0.',
});
const CooldownSeconds = Type.Integer({
  format: 'int32',
  minimum: 0,
  maximum: MAX_COOLDOWN_SECONDS,
  description: `While an incident stays open, \`alert.triggered\` is sent again for a matching event this long (event time) after the last one; 0: never again until it resolves. Default ${DEFAULT_COOLDOWN_SECONDS}.`,
});

export const CreateAlertBody = Type.Object(
  {
    name: Name,
    eventType: EventType,
    field: Field,
    op: Op,
    value: Value,
    tenantCohortId: Type.Optional(Nullable(CohortId)),
    forSeconds: Type.Optional(ForSeconds),
    cooldownSeconds: Type.Optional(CooldownSeconds),
  },
  { additionalProperties: false },
);

export const UpdateAlertBody = Type.Object(
  {
    name: Type.Optional(Name),
    eventType: Type.Optional(EventType),
    field: Type.Optional(Field),
    op: Type.Optional(Op),
    value: Type.Optional(Value),
    tenantCohortId: Type.Optional(Nullable(CohortId)),
    forSeconds: Type.Optional(ForSeconds),
    cooldownSeconds: Type.Optional(CooldownSeconds),
  },
  { additionalProperties: false },
);

export const AlertSchema = Type.Object(
  {
    alertId: Uuid,
    name: Name,
    eventType: EventType,
    field: Field,
    op: Op,
    value: Value,
    tenantCohortId: Nullable(CohortId),
    forSeconds: ForSeconds,
    cooldownSeconds: CooldownSeconds,
    createdAt: Timestamp(),
    updatedAt: Timestamp(),
  },
  { $id: 'Alert' },
);

const EventId = Type.String({ maxLength: 128, description: 'The id of the event.' });

export const IncidentSchema = Type.Object(
  {
    incidentId: Uuid,
    alertId: Uuid,
    sessionId: Uuid,
    playerId: Type.String({ maxLength: 128 }),
    tenantCohortId: Nullable(CohortId),
    status: StringEnum(['open', 'resolved'] as const),
    triggeredAt: Timestamp('The timestamp of the event that triggered it.'),
    triggeredEventId: EventId,
    notifications: Count('How many `alert.triggered` messages it sent (more than 1 after cooldowns).'),
    lastNotifiedAt: Timestamp('The timestamp of the event of its last `alert.triggered`.'),
    resolvedAt: Nullable(
      Timestamp('The timestamp of the event that no longer met the condition, or the session’s end.'),
    ),
    resolvedReason: Nullable(StringEnum(['condition_cleared', 'session_ended'] as const)),
    resolvedEventId: Nullable(EventId),
    createdAt: Timestamp('When the server opened it.'),
  },
  { $id: 'AlertIncident' },
);

export const IncidentStatus = StringEnum(['open', 'resolved'] as const, {
  description: 'Only open or only resolved incidents.',
});
