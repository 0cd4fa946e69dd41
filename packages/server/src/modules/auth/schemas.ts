import { Type } from 'typebox';
import { StringEnum, Uuid } from '../../http/schemas.ts';
import { SCOPES } from './scopes.ts';

export const ScopeSchema = StringEnum(SCOPES, { description: 'A tenant API scope.' });

export const TenantSchema = Type.Object({ tenantId: Uuid, name: Type.String(), createdAt: Type.Integer() });

export const ClientSchema = Type.Object({
  clientId: Uuid,
  tenantId: Uuid,
  name: Type.Union([Type.String(), Type.Null()]),
  scopes: Type.Array(ScopeSchema),
  createdAt: Type.Integer(),
  revokedAt: Type.Union([Type.Integer(), Type.Null()]),
});

/** A new client: the one response that carries its secret. */
export const CreatedClientSchema = Type.Object({
  clientId: Uuid,
  clientSecret: Type.String(),
  tenantId: Uuid,
  name: Type.Union([Type.String(), Type.Null()]),
  scopes: Type.Array(ScopeSchema),
  createdAt: Type.Integer(),
});

export const CreateClientBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    scopes: Type.Optional(Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true })),
  },
  { additionalProperties: false },
);

export const TenantParams = Type.Object({ tenantId: Uuid }, { additionalProperties: false });

export const PlayerId = Type.String({ minLength: 1, maxLength: 128, pattern: '^[^\\s]+$' });

export const CohortId = Type.String({
  minLength: 1,
  maxLength: 128,
  description: 'TenantCohortId, defined by the tenant.',
});

export const DeviceTokenSchema = Type.Object({
  token: Type.String(),
  playerId: Type.String(),
  tenantCohortId: Type.Union([Type.String(), Type.Null()]),
  expiresAt: Type.Integer(),
});

/** The form of `POST /oauth/token` (documented; the handler checks it, to answer in RFC 6749 §5.2 terms). */
export const TokenRequestBody = Type.Object({
  grant_type: Type.Literal('client_credentials'),
  scope: Type.Optional(Type.String({ description: 'Space-separated subset of the client’s scopes.' })),
  client_id: Type.Optional(Type.String()),
  client_secret: Type.Optional(Type.String()),
});

export const TokenResponseSchema = Type.Object({
  access_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer(),
  scope: Type.String(),
});

export const OAuthErrorSchema = Type.Object({ error: Type.String(), error_description: Type.String() });
