import { Type } from 'typebox';
import { Count, Nullable, StringEnum, Timestamp, Uuid } from '../../http/schemas.ts';
import { SCOPES } from './scopes.ts';

/** Longest `error_description` of a token error (`routes/oauth.ts` cuts longer ones). */
export const MAX_OAUTH_ERROR_DESCRIPTION = 1024;

export const ScopeSchema = StringEnum(SCOPES, { description: 'A tenant API scope.' });

/** Names of tenants and clients. */
export const MAX_NAME_LENGTH = 200;
const Name = Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH });

/** Longest event retention a tenant can be given, in days (100 years). */
export const MAX_EVENT_RETENTION_DAYS = 36500;

const EventRetentionDays = Nullable(
  Type.Integer({
    format: 'int32',
    minimum: 0,
    maximum: MAX_EVENT_RETENTION_DAYS,
    description:
      "Days the tenant's events are kept after the server received them: 0 keeps them forever; null follows the server's LIVELINE_EVENT_RETENTION_DAYS.",
  }),
);

export const TenantSchema = Type.Object({
  tenantId: Uuid,
  name: Name,
  createdAt: Timestamp(),
  eventRetentionDays: EventRetentionDays,
});

/** What the operator may change on a tenant. */
export const TenantPatchSchema = Type.Object(
  { eventRetentionDays: EventRetentionDays },
  { additionalProperties: false },
);

/** How the server writes a secret: a readable prefix, `_`, then 256 random bits in base64url. */
const secretOf = (prefix: string, description: string) =>
  Type.String({ pattern: `^${prefix}_[A-Za-z0-9_-]+$`, maxLength: 128, description });

const Scopes = Type.Array(ScopeSchema, { minItems: 1, maxItems: SCOPES.length, uniqueItems: true });

export const ClientSchema = Type.Object({
  clientId: Uuid,
  tenantId: Uuid,
  name: Nullable(Name),
  scopes: Scopes,
  createdAt: Timestamp(),
  revokedAt: Nullable(Timestamp()),
  previousSecretExpiresAt: Nullable(
    Timestamp('Until when the secret replaced by the last rotation still works; null when it does not.'),
  ),
});

/** A new client: the one response that carries its secret. */
export const CreatedClientSchema = Type.Object({
  clientId: Uuid,
  clientSecret: secretOf('lls', 'Shown only in this response.'),
  tenantId: Uuid,
  name: Nullable(Name),
  scopes: Scopes,
  createdAt: Timestamp(),
});

export const CreateClientBody = Type.Object(
  {
    name: Type.Optional(Name),
    scopes: Type.Optional(Scopes),
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

/** A signed JWT as the server issues it (header, claims, signature in base64url). */
const Jwt = Type.String({
  pattern: '^[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$',
  maxLength: 4096,
  description: 'A signed JWT.',
});

export const DeviceTokenSchema = Type.Object({
  token: Jwt,
  playerId: PlayerId,
  tenantCohortId: Nullable(CohortId),
  expiresAt: Timestamp(),
});

/** The form of `POST /oauth/token` (documented; the handler checks it, to answer in RFC 6749 §5.2 terms). */
/** A space-separated list of scopes (RFC 6749 §3.3). */
const ScopeList = (description: string) =>
  Type.String({ pattern: '^[\\x21\\x23-\\x5B\\x5D-\\x7E ]*$', maxLength: 1024, description });

export const TokenRequestBody = Type.Object({
  grant_type: Type.Literal('client_credentials'),
  scope: Type.Optional(ScopeList('Space-separated subset of the client’s scopes (default: all of them).')),
  client_id: Type.Optional(
    Type.String({ format: 'uuid', maxLength: 36, description: 'Or HTTP Basic (`client_id:client_secret`).' }),
  ),
  client_secret: Type.Optional(Type.String({ pattern: '^lls_', maxLength: 256 })),
});

export const TokenResponseSchema = Type.Object({
  access_token: Jwt,
  token_type: Type.Literal('Bearer'),
  expires_in: Count('Seconds until the token expires.'),
  scope: ScopeList('The scopes granted.'),
});

/** RFC 6749 §5.2. */
export const OAuthErrorSchema = Type.Object({
  error: StringEnum(['invalid_request', 'invalid_client', 'unsupported_grant_type', 'invalid_scope']),
  error_description: Type.String({ maxLength: MAX_OAUTH_ERROR_DESCRIPTION }),
});

/** Base64url of a key's coordinates (P-256: 32 bytes, 43 characters). */
const KeyPart = Type.String({ pattern: '^[A-Za-z0-9_-]+$', maxLength: 512 });

/** RFC 7517 key set: the public halves of the signing keys (every one still verifying). */
export const JwksSchema = Type.Object({
  keys: Type.Array(
    Type.Object(
      {
        kty: Type.String({ pattern: '^[A-Za-z0-9]+$', maxLength: 16, description: '`EC`.' }),
        crv: Type.Optional(
          Type.String({ pattern: '^[A-Za-z0-9-]+$', maxLength: 16, description: '`P-256`.' }),
        ),
        x: Type.Optional(KeyPart),
        y: Type.Optional(KeyPart),
        kid: Type.String({ pattern: '^[A-Za-z0-9_.:-]+$', maxLength: 128 }),
        alg: Type.String({ pattern: '^[A-Za-z0-9]+$', maxLength: 16, description: '`ES256`.' }),
        use: Type.Literal('sig'),
      },
      { additionalProperties: true },
    ),
    { maxItems: 100 },
  ),
});

/** A client after a secret rotation: the one response that carries the new secret. */
export const RotatedClientSchema = Type.Object({
  clientId: Uuid,
  clientSecret: secretOf('lls', 'The new secret. Shown only in this response.'),
  tenantId: Uuid,
  name: Nullable(Name),
  scopes: Scopes,
  createdAt: Timestamp(),
  previousSecretExpiresAt: Nullable(
    Timestamp('Until when the previous secret still works (24 h); null with `immediately`.'),
  ),
});

export const RotateSecretBody = Type.Object(
  {
    immediately: Type.Optional(
      Type.Boolean({ description: 'Stop the current secret at once instead of after 24 h.' }),
    ),
  },
  { additionalProperties: false },
);

export const ClientParams = Type.Object({ clientId: Uuid }, { additionalProperties: false });
export const TenantClientParams = Type.Object(
  { tenantId: Uuid, clientId: Uuid },
  { additionalProperties: false },
);

export const RevokePlayerTokensBody = Type.Object({ playerId: PlayerId }, { additionalProperties: false });

export const PlayerTokensRevokedSchema = Type.Object({
  playerId: PlayerId,
  revokedAt: Timestamp("The player's device tokens issued before this time are refused."),
});

export const SigningKeySchema = Type.Object({
  kid: Type.String({
    pattern: '^[A-Za-z0-9_.:-]+$',
    maxLength: 128,
    description: 'Key id, in the `kid` header of the tokens it signs.',
  }),
  createdAt: Timestamp(),
  signing: Type.Boolean({ description: 'True for the key new tokens are signed with (the newest).' }),
  retiresAt: Nullable(
    Timestamp('When an older key stops verifying and is deleted; null for the signing key.'),
  ),
});

const SigningKeys = Type.Array(SigningKeySchema, { maxItems: 100 });

export const SigningKeysSchema = Type.Object({ keys: SigningKeys });

export const RotatedKeySchema = Type.Object({ key: SigningKeySchema, keys: SigningKeys });

export const RotateKeyBody = Type.Object(
  {
    retireOthers: Type.Optional(
      Type.Boolean({
        description:
          'Delete every other key at once (a key leaked): every token signed before fails. ' +
          'Default: they verify until the longest token lifetime has passed.',
      }),
    ),
  },
  { additionalProperties: false },
);
