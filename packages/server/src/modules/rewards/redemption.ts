import type { Redemption, RedemptionConfig } from '@liveline/protocol';
import type { FieldError } from '../../http/problem.ts';

export type { RedemptionConfig };
/** What a claim carries to the viewer app: the configuration with the claim's values filled in. */
export type RedemptionPayload = Redemption;

export interface ClaimValues {
  displayCode: string;
  achievementCode: string;
  rewardCode: string;
  rewardTitle: string;
}

const PLACEHOLDER = /\{([A-Za-z][A-Za-z0-9_.]*)\}/g;
const INSTRUCTION_PLACEHOLDERS = ['code', 'rewardTitle'];
const URL_PLACEHOLDERS = ['achievement.code', 'reward.code'];
/** Schemes a viewer app must never be asked to open. */
const FORBIDDEN_SCHEMES = new Set(['javascript:', 'data:', 'vbscript:', 'file:', 'blob:']);

function placeholdersIn(template: string): string[] {
  return [...template.matchAll(PLACEHOLDER)].map((m) => m[1]);
}

/** Every `{name}` must be one the template may use, and each required one must be there. */
function checkPlaceholders(
  template: string,
  path: string,
  allowed: readonly string[],
  required: readonly string[],
): FieldError[] {
  const used = placeholdersIn(template);
  const errors: FieldError[] = [];
  for (const name of new Set(used)) {
    if (!allowed.includes(name)) {
      errors.push({
        path,
        message: `unknown placeholder {${name}}; allowed: ${allowed.map((a) => `{${a}}`).join(', ')}`,
      });
    }
  }
  for (const name of required) {
    if (!used.includes(name)) errors.push({ path, message: `must contain the placeholder {${name}}` });
  }
  return errors;
}

/** A URL template must give an absolute URL once filled; `webUrl` only http(s). */
function checkUrlTemplate(template: string, path: string, webOnly: boolean): FieldError[] {
  const errors = checkPlaceholders(template, path, URL_PLACEHOLDERS, URL_PLACEHOLDERS);
  if (errors.length > 0) return errors;
  let url: URL;
  try {
    url = new URL(fillUrl(template, { achievementCode: 'ACHIEVEMENT', rewardCode: 'REWARD' }));
  } catch {
    return [{ path, message: 'must be an absolute URL once its placeholders are filled' }];
  }
  if (webOnly && url.protocol !== 'https:' && url.protocol !== 'http:') {
    return [{ path, message: 'must be an http: or https: URL' }];
  }
  if (FORBIDDEN_SCHEMES.has(url.protocol))
    return [{ path, message: `must not use the ${url.protocol} scheme` }];
  return [];
}

/**
 * The rules a JSON schema cannot state: the placeholders each template needs and may use, and
 * URLs that parse. Field shapes and types are the schema's job. Paths start with `prefix`.
 */
export function checkRedemption(config: RedemptionConfig, prefix = 'redemption'): FieldError[] {
  switch (config.method) {
    case 'displayCode':
      return checkPlaceholders(
        config.instructionsTemplate,
        `${prefix}.instructionsTemplate`,
        INSTRUCTION_PLACEHOLDERS,
        ['code'],
      );
    case 'intent':
      return checkUrlTemplate(config.dataUrlTemplate, `${prefix}.dataUrlTemplate`, false);
    case 'webUrl':
      return checkUrlTemplate(config.urlTemplate, `${prefix}.urlTemplate`, true);
  }
}

/** Fills `{achievement.code}` and `{reward.code}`, URL-encoded. */
function fillUrl(template: string, values: { achievementCode: string; rewardCode: string }): string {
  return template.replace(PLACEHOLDER, (whole, name: string) => {
    if (name === 'achievement.code') return encodeURIComponent(values.achievementCode);
    if (name === 'reward.code') return encodeURIComponent(values.rewardCode);
    return whole;
  });
}

/**
 * The claim's redemption. URLs get their placeholders URL-encoded; the display-code instructions are
 * text for the player, so `{code}` and `{rewardTitle}` go in as they are.
 */
export function fillRedemption(config: RedemptionConfig, values: ClaimValues): RedemptionPayload {
  switch (config.method) {
    case 'displayCode':
      return {
        method: 'displayCode',
        code: values.displayCode,
        instructions: config.instructionsTemplate.replace(PLACEHOLDER, (whole, name: string) => {
          if (name === 'code') return values.displayCode;
          if (name === 'rewardTitle') return values.rewardTitle;
          return whole;
        }),
      };
    case 'intent': {
      const dataUrl = fillUrl(config.dataUrlTemplate, values);
      return {
        method: 'intent',
        form: config.form,
        packageName: config.packageName,
        activityName: config.activityName ?? null,
        action: config.action ?? null,
        category: config.category ?? null,
        flags: config.flags ?? null,
        dataUrl,
        extras: { achievementCode: values.achievementCode, rewardCode: values.rewardCode },
        fallbackUrl: dataUrl,
      };
    }
    case 'webUrl':
      return { method: 'webUrl', url: fillUrl(config.urlTemplate, values) };
  }
}
