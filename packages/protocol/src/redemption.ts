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
      Type.Integer({ minimum: -2147483648, maximum: 2147483647, description: 'int32 bitmask.' }),
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

export const DisplayCodeRedemptionSchema = Type.Object({
  method: Type.Literal('displayCode'),
  code: Type.String(),
  instructions: Type.String(),
});
export const IntentRedemptionSchema = Type.Object({
  method: Type.Literal('intent'),
  form: StringEnum(INTENT_FORMS),
  packageName: Type.String(),
  activityName: Nullable(Type.String()),
  action: Nullable(Type.String()),
  category: Nullable(Type.String()),
  flags: Nullable(Type.Integer()),
  dataUrl: Type.String(),
  extras: Type.Object({ achievementCode: Type.String(), rewardCode: Type.String() }),
  fallbackUrl: Type.String(),
});
export const WebUrlRedemptionSchema = Type.Object({ method: Type.Literal('webUrl'), url: Type.String() });
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
