import type { TSchema } from 'typebox';
import { type FieldError, problems } from '../../http/problem.ts';
import { ajvErrorsToFieldErrors, bodyAjv } from '../../http/validation.ts';
import { checkRedemption, type RedemptionConfig } from './redemption.ts';
import {
  CampaignCreateShape,
  CampaignPatchShape,
  REDEMPTION_SCHEMAS,
  RedemptionMethodShape,
} from './schemas.ts';
import { canonicalTimeZone } from './timezone.ts';

/**
 * Campaign bodies, checked in the handler: `redemption` is a union keyed by `method`, and a union
 * in JSON Schema reports every branch's complaints. Here the method is read first, then the body is
 * checked against that method's schema alone, so each error points at the field that is wrong.
 */

export interface CampaignInput {
  name: string;
  timezone: string;
  startsAt: number | null;
  endsAt: number | null;
  redemption: RedemptionConfig;
}

export type CampaignPatch = Partial<CampaignInput>;

const compiled = new Map<TSchema, ReturnType<typeof bodyAjv.compile>>();

function schemaErrors(schema: TSchema, value: unknown, prefix = ''): FieldError[] {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = bodyAjv.compile(schema);
    compiled.set(schema, validate);
  }
  return validate(value) ? [] : ajvErrorsToFieldErrors(validate.errors ?? [], prefix);
}

function redemptionErrors(value: unknown): FieldError[] {
  const methodErrors = schemaErrors(RedemptionMethodShape, value, 'redemption');
  if (methodErrors.length > 0) return methodErrors;
  const method = (value as { method: keyof typeof REDEMPTION_SCHEMAS }).method;
  const shapeErrors = schemaErrors(REDEMPTION_SCHEMAS[method], value, 'redemption');
  if (shapeErrors.length > 0) return shapeErrors;
  return checkRedemption(value as RedemptionConfig);
}

function asObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw problems.validation('The body must be a JSON object.', [{ path: '', message: 'must be object' }]);
  }
  return body as Record<string, unknown>;
}

function fail(errors: FieldError[]): never {
  const first = errors[0];
  throw problems.validation(
    `The request body is invalid: ${first.path || 'body'} ${first.message}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ''}.`,
    errors,
  );
}

/** The rules between fields: a known time zone, and a window that ends after it starts. */
function crossFieldErrors(merged: {
  timezone?: unknown;
  startsAt?: number | null;
  endsAt?: number | null;
}): FieldError[] {
  const errors: FieldError[] = [];
  if (typeof merged.timezone === 'string' && canonicalTimeZone(merged.timezone) === null) {
    errors.push({ path: 'timezone', message: 'must be an IANA time zone name such as Europe/Berlin or UTC' });
  }
  const { startsAt, endsAt } = merged;
  if (typeof startsAt === 'number' && typeof endsAt === 'number' && endsAt <= startsAt) {
    errors.push({ path: 'endsAt', message: 'must be after startsAt' });
  }
  return errors;
}

export function parseCampaignCreate(body: unknown): CampaignInput {
  const raw = asObject(body);
  const errors = schemaErrors(CampaignCreateShape, raw);
  if ('redemption' in raw) errors.push(...redemptionErrors(raw.redemption));
  if (errors.length === 0) errors.push(...crossFieldErrors(raw));
  if (errors.length > 0) fail(errors);
  return {
    name: raw.name as string,
    timezone: canonicalTimeZone((raw.timezone as string | undefined) ?? 'UTC')!,
    startsAt: (raw.startsAt as number | null | undefined) ?? null,
    endsAt: (raw.endsAt as number | null | undefined) ?? null,
    redemption: raw.redemption as RedemptionConfig,
  };
}

/** A patch, checked on its own and then as applied to `current` (the window must still be in order). */
export function parseCampaignPatch(body: unknown, current: CampaignInput): CampaignPatch {
  const raw = asObject(body);
  const errors = schemaErrors(CampaignPatchShape, raw);
  if (raw.redemption !== undefined) errors.push(...redemptionErrors(raw.redemption));
  if (errors.length === 0) {
    errors.push(
      ...crossFieldErrors({
        timezone: raw.timezone,
        startsAt: 'startsAt' in raw ? (raw.startsAt as number | null) : current.startsAt,
        endsAt: 'endsAt' in raw ? (raw.endsAt as number | null) : current.endsAt,
      }),
    );
  }
  if (errors.length > 0) fail(errors);
  const patch: CampaignPatch = {};
  if (raw.name !== undefined) patch.name = raw.name as string;
  if (raw.timezone !== undefined) patch.timezone = canonicalTimeZone(raw.timezone as string)!;
  if ('startsAt' in raw) patch.startsAt = raw.startsAt as number | null;
  if ('endsAt' in raw) patch.endsAt = raw.endsAt as number | null;
  if (raw.redemption !== undefined) patch.redemption = raw.redemption as RedemptionConfig;
  return patch;
}
