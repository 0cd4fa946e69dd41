import { Type } from 'typebox';
import { Count, Nullable, StringEnum, Timestamp, Uuid } from '../../http/schemas.ts';

/** A player id as device tokens carry it (`POST /client-tokens`): just a name to the server. */
export const PlayerId = Type.String({ minLength: 1, maxLength: 128, pattern: '^[^\\s]+$' });

export const Erased = Type.Object({
  playerId: PlayerId,
  erasedAt: Timestamp("When the erasure was asked (the pending one's, when one was under way)."),
});

export const AUDIT_ACTIONS = ['player.export', 'player.erase'] as const;

export const AuditEntry = Type.Object({
  auditId: Uuid,
  tenantId: Uuid,
  action: StringEnum(AUDIT_ACTIONS),
  playerId: PlayerId,
  actor: Type.String({
    maxLength: 128,
    description: '`operator`, or the client id of the tenant token that asked.',
  }),
  at: Timestamp(),
  counts: Nullable(
    Type.Record(Type.String({ maxLength: 64 }), Count(), {
      description: "What was exported or erased, per kind; an erasure's are null until it completed.",
    }),
  ),
});
