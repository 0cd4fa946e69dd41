import {
  RedemptionSchema as ClaimRedemptionSchema,
  REDEMPTION_CONFIG_SCHEMAS,
  REDEMPTION_METHODS,
  RedemptionConfigSchema,
} from '@liveline/protocol';
import { Type } from 'typebox';
import { StringEnum, Uuid } from '../../http/schemas.ts';
import { RULE_TYPES } from './progress.ts';
import { TARGET_MAX, TARGET_MIN } from './rules.ts';
import { LIMITS } from './template-import.ts';

/** Request and response shapes of the rewards routes: validation, types and /openapi.json. */

const Text = (max: number, description?: string) =>
  Type.String({ minLength: 1, maxLength: max, description });
const Time = Type.Integer({ minimum: 0, description: 'Unix milliseconds.' });
const NullableTime = Type.Union([Time, Type.Null()]);

// The redemption shapes are part of the protocol (the viewer app reads them too): defined once there.
export const RedemptionSchema = RedemptionConfigSchema;
export const REDEMPTION_SCHEMAS = REDEMPTION_CONFIG_SCHEMAS;

const campaignFields = {
  name: Text(200),
  timezone: Type.Optional(Type.String({ description: 'IANA time zone; default UTC.' })),
  startsAt: Type.Optional(NullableTime),
  endsAt: Type.Optional(NullableTime),
};

/** The documented body (the handler checks `redemption` per method, for exact error paths). */
export const CampaignCreateBody = Type.Object(
  { ...campaignFields, redemption: RedemptionSchema },
  { additionalProperties: false },
);
/** What the handler validates first; `redemption` is then checked against its method's schema. */
export const CampaignCreateShape = Type.Object(
  { ...campaignFields, redemption: Type.Unknown() },
  { additionalProperties: false },
);
export const CampaignPatchBody = Type.Object(
  {
    name: Type.Optional(campaignFields.name),
    timezone: campaignFields.timezone,
    startsAt: campaignFields.startsAt,
    endsAt: campaignFields.endsAt,
    redemption: Type.Optional(RedemptionSchema),
  },
  { additionalProperties: false, minProperties: 1 },
);
export const CampaignPatchShape = Type.Object(
  { ...CampaignPatchBody.properties, redemption: Type.Optional(Type.Unknown()) },
  { additionalProperties: false, minProperties: 1 },
);
export const RedemptionMethodShape = Type.Object(
  { method: StringEnum(REDEMPTION_METHODS) },
  { additionalProperties: true },
);

export const CampaignSchema = Type.Object({
  campaignId: Uuid,
  name: Type.String(),
  timezone: Type.String(),
  startsAt: NullableTime,
  endsAt: NullableTime,
  redemption: RedemptionSchema,
  createdAt: Time,
  updatedAt: Time,
});
export const CampaignWithSecretSchema = Type.Object({
  ...CampaignSchema.properties,
  campaignSecret: Type.String({ description: 'Shown only in this response.' }),
});

export const RuleSchema = Type.Object(
  {
    type: StringEnum(RULE_TYPES, {
      description:
        'totalMinutes (Total mins streamed), singleSessionMinutes (Mins streamed in a single session), ' +
        'uniqueDays (Unique days streamed on), streakDays (Streak of days streamed on), sessionCount (Stream session count).',
    }),
    target: Type.Integer({ minimum: TARGET_MIN, maximum: TARGET_MAX }),
  },
  { additionalProperties: false },
);

const challengeFields = {
  rewardCode: Text(LIMITS.rewardCode, 'Unique in the campaign; returned to the tenant on verification.'),
  rewardTitle: Text(LIMITS.rewardTitle),
  rewardRequirement: Text(LIMITS.rewardRequirement),
  rewardImage: Type.String({ minLength: 1, description: 'Base64 JPEG of exactly 200×200 pixels.' }),
  rule: RuleSchema,
};
export const ChallengeCreateBody = Type.Object(challengeFields, { additionalProperties: false });
export const ChallengePatchBody = Type.Object(
  {
    rewardCode: Type.Optional(challengeFields.rewardCode),
    rewardTitle: Type.Optional(challengeFields.rewardTitle),
    rewardRequirement: Type.Optional(challengeFields.rewardRequirement),
    rewardImage: Type.Optional(challengeFields.rewardImage),
    rule: Type.Optional(RuleSchema),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const ChallengeSchema = Type.Object({
  challengeId: Uuid,
  campaignId: Uuid,
  rewardCode: Type.String(),
  rewardTitle: Type.String(),
  rewardRequirement: Type.String(),
  rule: RuleSchema,
  imageUrl: Type.String(),
  createdAt: Time,
  updatedAt: Time,
});

const Progress = Type.Object({ value: Type.Integer(), target: Type.Integer() });
const ChallengeStatus = StringEnum(['inProgress', 'complete', 'claimed'] as const);

export const ClaimSchema = Type.Object({
  claimId: Type.Integer({ minimum: 1 }),
  challengeId: Uuid,
  campaignId: Uuid,
  rewardCode: Type.String(),
  achievementCode: Type.String(),
  displayCode: Type.String({ description: 'XXXX-XXXX' }),
  claimedAt: Time,
  redemption: ClaimRedemptionSchema,
});

export const DeviceChallengeSchema = Type.Object({
  ...ChallengeSchema.properties,
  progress: Progress,
  status: ChallengeStatus,
  claim: Type.Union([ClaimSchema, Type.Null()]),
});

const Metrics = Type.Object(Object.fromEntries(RULE_TYPES.map((r) => [r, Type.Integer()])));

export const PlayerProgressSchema = Type.Object({
  campaignId: Uuid,
  playerId: Type.String(),
  evaluatedAt: Time,
  metrics: Metrics,
  challenges: Type.Array(
    Type.Object({
      challengeId: Uuid,
      rewardCode: Type.String(),
      rewardTitle: Type.String(),
      rule: RuleSchema,
      progress: Progress,
      status: ChallengeStatus,
      claimId: Type.Union([Type.Integer(), Type.Null()]),
      claimedAt: NullableTime,
      verifiedAt: NullableTime,
    }),
  ),
});

export const VerifyBody = Type.Object(
  {
    campaignSecret: Type.String({ minLength: 1, maxLength: 256 }),
    verificationCode: Type.String({ minLength: 1, maxLength: 128 }),
    campaignId: Type.Optional(Uuid),
  },
  { additionalProperties: false },
);
export const VerifyAnswer = Type.Object({
  claimId: Type.Integer(),
  rewardCode: Type.String(),
  playerId: Type.String(),
  claimedAt: Time,
  verifiedAt: Time,
  alreadyVerified: Type.Boolean(),
});

export const PlayerIdParam = Type.String({ minLength: 1, maxLength: 128 });
