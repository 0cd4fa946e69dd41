import {
  AchievementCodeSchema,
  RedemptionSchema as ClaimRedemptionSchema,
  DisplayCodeSchema,
  REDEMPTION_CONFIG_SCHEMAS,
  REDEMPTION_METHODS,
  RedemptionConfigSchema,
} from '@liveline/protocol';
import { Type } from 'typebox';
import { Count, Int32, Nullable, StringEnum, Timestamp, UrlOut, Uuid } from '../../http/schemas.ts';
import { RULE_TYPES } from './progress.ts';
import { TARGET_MAX, TARGET_MIN } from './rules.ts';
import { LIMITS } from './template-import.ts';

/** Request and response shapes of the rewards routes: validation, types and /openapi.json. */

const Text = (max: number, description?: string) =>
  Type.String({ minLength: 1, maxLength: max, description });
const Time = Timestamp();
const NullableTime = Nullable(Time);
/** Longest IANA time zone name accepted (the longest in the database has about 30 characters). */
const MAX_TIMEZONE_LENGTH = 64;
// The handler says what a time zone must look like (`timezone.ts`), with a friendlier message.
const Timezone = (description?: string) =>
  Type.String({ minLength: 1, maxLength: MAX_TIMEZONE_LENGTH, description });
/**
 * Longest `rewardImage` text. An image over 1 MiB is refused as `invalid_image` whatever its text
 * (`jpeg.ts`), and the body limit (10 MiB by default) applies first: this bound is beyond both, so
 * it changes no answer; it keeps the schema finite.
 */
const MAX_IMAGE_BASE64_LENGTH = 16 * 1024 * 1024;
/** A challenge's image URL, as the server builds it. */
const ImageUrl = UrlOut(4096, 'Where to load the 200×200 JPEG (with a token that may read it).');

// The redemption shapes are part of the protocol (the viewer app reads them too): defined once there.
export const RedemptionSchema = RedemptionConfigSchema;
export const REDEMPTION_SCHEMAS = REDEMPTION_CONFIG_SCHEMAS;

const campaignFields = {
  name: Text(200),
  timezone: Type.Optional(Timezone('IANA time zone; default UTC.')),
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
  name: Text(200),
  timezone: Timezone(),
  startsAt: NullableTime,
  endsAt: NullableTime,
  redemption: RedemptionSchema,
  createdAt: Time,
  updatedAt: Time,
});
export const CampaignWithSecretSchema = Type.Object({
  ...CampaignSchema.properties,
  campaignSecret: Type.String({
    pattern: '^lcs_[A-Za-z0-9_-]+$',
    maxLength: 128,
    description: 'Shown only in this response.',
  }),
});

export const RuleSchema = Type.Object(
  {
    type: StringEnum(RULE_TYPES, {
      description:
        'totalMinutes (Total mins streamed), singleSessionMinutes (Mins streamed in a single session), ' +
        'uniqueDays (Unique days streamed on), streakDays (Streak of days streamed on), sessionCount (Stream session count).',
    }),
    target: Int32(TARGET_MIN, TARGET_MAX),
  },
  { additionalProperties: false },
);

const challengeFields = {
  rewardCode: Text(LIMITS.rewardCode, 'Unique in the campaign; returned to the tenant on verification.'),
  rewardTitle: Text(LIMITS.rewardTitle),
  rewardRequirement: Text(LIMITS.rewardRequirement),
  rewardImage: Type.String({
    minLength: 1,
    maxLength: MAX_IMAGE_BASE64_LENGTH,
    description: 'Base64 JPEG of exactly 200×200 pixels.',
  }),
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
  rewardCode: challengeFields.rewardCode,
  rewardTitle: challengeFields.rewardTitle,
  rewardRequirement: challengeFields.rewardRequirement,
  rule: RuleSchema,
  imageUrl: ImageUrl,
  createdAt: Time,
  updatedAt: Time,
});

const Progress = Type.Object({
  value: Count('How far the player has come, in the rule’s unit.'),
  target: Int32(TARGET_MIN, TARGET_MAX),
});
const ClaimId = Type.Integer({ format: 'int64', minimum: 1, maximum: Number.MAX_SAFE_INTEGER });
const ChallengeStatus = StringEnum(['inProgress', 'complete', 'claimed'] as const);

export const ClaimSchema = Type.Object({
  claimId: ClaimId,
  challengeId: Uuid,
  campaignId: Uuid,
  rewardCode: challengeFields.rewardCode,
  achievementCode: AchievementCodeSchema,
  displayCode: DisplayCodeSchema,
  claimedAt: Time,
  redemption: ClaimRedemptionSchema,
});

export const DeviceChallengeSchema = Type.Object({
  ...ChallengeSchema.properties,
  progress: Progress,
  status: ChallengeStatus,
  claim: Type.Union([ClaimSchema, Type.Null()]),
});

const Metrics = Type.Object(Object.fromEntries(RULE_TYPES.map((r) => [r, Count()])));

export const PlayerIdParam = Type.String({ minLength: 1, maxLength: 128 });

export const PlayerProgressSchema = Type.Object({
  campaignId: Uuid,
  playerId: PlayerIdParam,
  evaluatedAt: Time,
  metrics: Metrics,
  challenges: Type.Array(
    Type.Object({
      challengeId: Uuid,
      rewardCode: challengeFields.rewardCode,
      rewardTitle: challengeFields.rewardTitle,
      rule: RuleSchema,
      progress: Progress,
      status: ChallengeStatus,
      claimId: Nullable(ClaimId),
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
  claimId: ClaimId,
  rewardCode: challengeFields.rewardCode,
  playerId: Type.Union([PlayerIdParam, Type.Null()], {
    description: "Null once the player's data was erased (the claim and its codes stay).",
  }),
  claimedAt: Time,
  verifiedAt: Time,
  alreadyVerified: Type.Boolean(),
});
