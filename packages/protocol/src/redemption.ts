/**
 * How a claimed reward reaches the player (CONTRACT §7): a campaign's redemption configuration (what
 * the tenant sets) and a claim's redemption (that configuration with the claim's codes filled in, what
 * the viewer app acts on: show `instructions`, fire the intent falling back to `fallbackUrl`, or open `url`).
 */
import { type Static, Type } from 'typebox';
import { StringEnum } from './string-enum.ts';

export const REDEMPTION_METHODS = ['displayCode', 'intent', 'webUrl'] as const;
export type RedemptionMethod = (typeof REDEMPTION_METHODS)[number];

/** How an Android intent is fired. */
export const INTENT_FORMS = ['startActivity', 'broadcast', 'startService'] as const;
export type IntentForm = (typeof INTENT_FORMS)[number];

/** Placeholders of the templates; URL templates get the codes URL-encoded. */
export const REDEMPTION_PLACEHOLDERS = {
  code: '{code}',
  rewardTitle: '{rewardTitle}',
  achievementCode: '{achievement.code}',
  rewardCode: '{reward.code}',
} as const;

const Text = (max: number, description?: string) =>
  Type.String({ minLength: 1, maxLength: max, description });

// ---- a campaign's configuration ------------------------------------------------------------------------

export const DisplayCodeRedemptionConfigSchema = Type.Object(
  {
    method: Type.Literal('displayCode'),
    instructionsTemplate: Text(4096, 'Shown to the player; must contain {code}, may use {rewardTitle}.'),
  },
  { additionalProperties: false },
);
export const IntentRedemptionConfigSchema = Type.Object(
  {
    method: Type.Literal('intent'),
    form: StringEnum(INTENT_FORMS),
    packageName: Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: '^[A-Za-z][A-Za-z0-9_]*(\\.[A-Za-z0-9_]+)*$',
      description: 'Android application id, e.g. com.example.game.',
    }),
    activityName: Type.Optional(Text(255, 'Activity or service (class name) to start.')),
    action: Type.Optional(Text(255)),
    category: Type.Optional(Text(255)),
    flags: Type.Optional(
      Type.Integer({
        format: 'int32',
        minimum: -2147483648,
        maximum: 2147483647,
        description: 'int32 bitmask.',
      }),
    ),
    dataUrlTemplate: Text(2048, 'Must contain {achievement.code} and {reward.code}.'),
  },
  { additionalProperties: false },
);
export const WebUrlRedemptionConfigSchema = Type.Object(
  {
    method: Type.Literal('webUrl'),
    urlTemplate: Text(2048, 'An http(s) URL; must contain {achievement.code} and {reward.code}.'),
  },
  { additionalProperties: false },
);
/** A campaign's `redemption`: one of the three methods. */
export const RedemptionConfigSchema = Type.Union([
  DisplayCodeRedemptionConfigSchema,
  IntentRedemptionConfigSchema,
  WebUrlRedemptionConfigSchema,
]);
/** The configuration's schema per method (for error paths exact to the method). */
export const REDEMPTION_CONFIG_SCHEMAS = {
  displayCode: DisplayCodeRedemptionConfigSchema,
  intent: IntentRedemptionConfigSchema,
  webUrl: WebUrlRedemptionConfigSchema,
} as const;
export type DisplayCodeRedemptionConfig = Static<typeof DisplayCodeRedemptionConfigSchema>;
export type IntentRedemptionConfig = Static<typeof IntentRedemptionConfigSchema>;
export type WebUrlRedemptionConfig = Static<typeof WebUrlRedemptionConfigSchema>;
export type RedemptionConfig = DisplayCodeRedemptionConfig | IntentRedemptionConfig | WebUrlRedemptionConfig;

// ---- a claim's redemption ------------------------------------------------------------------------------

const Nullable = <T extends ReturnType<typeof Type.String> | ReturnType<typeof Type.Integer>>(schema: T) =>
  Type.Union([schema, Type.Null()]);

/**
 * The most a filled template can hold (in characters): a 4096-character instructions template made of
 * `{rewardTitle}` (13 characters) each replaced by a 200-character title stays under 64 Ki; a
 * 2048-character URL template made of `{reward.code}` each replaced by a 128-character code
 * URL-encoded (up to 12 characters per character) stays under 256 Ki.
 */
export const MAX_FILLED_INSTRUCTIONS = 65_536;
export const MAX_FILLED_URL = 262_144;

/** The display code: `XXXX-XXXX` from `ABCDEFGHJKLMNPQRSTUVWXYZ23456789`. */
export const DisplayCodeSchema = Type.String({
  pattern: '^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{4}-[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{4}$',
  maxLength: 9,
  description: 'XXXX-XXXX',
});
/** The achievement code of a claim. */
export const AchievementCodeSchema = Type.String({ pattern: '^[A-Z0-9]+$', maxLength: 64 });
/** A challenge's reward code, as the tenant chose it. */
const RewardCode = Type.String({ minLength: 1, maxLength: 128 });
const Name255 = Type.String({ minLength: 1, maxLength: 255 });
const FilledUrl = Type.String({ maxLength: MAX_FILLED_URL, description: 'The template, filled.' });

export const DisplayCodeRedemptionSchema = Type.Object({
  method: Type.Literal('displayCode'),
  code: DisplayCodeSchema,
  instructions: Type.String({ maxLength: MAX_FILLED_INSTRUCTIONS, description: 'The template, filled.' }),
});
export const IntentRedemptionSchema = Type.Object({
  method: Type.Literal('intent'),
  form: StringEnum(INTENT_FORMS),
  packageName: IntentRedemptionConfigSchema.properties.packageName,
  activityName: Nullable(Name255),
  action: Nullable(Name255),
  category: Nullable(Name255),
  flags: Nullable(Type.Integer({ format: 'int32', minimum: -2147483648, maximum: 2147483647 })),
  dataUrl: FilledUrl,
  extras: Type.Object({ achievementCode: AchievementCodeSchema, rewardCode: RewardCode }),
  fallbackUrl: FilledUrl,
});
export const WebUrlRedemptionSchema = Type.Object({ method: Type.Literal('webUrl'), url: FilledUrl });
/** A claim's `redemption`: what the viewer app does to hand the reward over. */
export const RedemptionSchema = Type.Union([
  DisplayCodeRedemptionSchema,
  IntentRedemptionSchema,
  WebUrlRedemptionSchema,
]);
export type DisplayCodeRedemption = Static<typeof DisplayCodeRedemptionSchema>;
export type IntentRedemption = Static<typeof IntentRedemptionSchema>;
export type WebUrlRedemption = Static<typeof WebUrlRedemptionSchema>;
export type Redemption = DisplayCodeRedemption | IntentRedemption | WebUrlRedemption;
