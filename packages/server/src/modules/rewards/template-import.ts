import { parse } from 'csv-parse/sync';
import type { FieldError } from '../../http/problem.ts';
import { checkRewardImage } from './jpeg.ts';
import type { RuleType } from './progress.ts';
import { RULE_WORDING, ruleFromWording, TARGET_MAX, TARGET_MIN } from './rules.ts';

/**
 * The challenge template (CONTRACT §7): a CSV with the header
 * `Reward Code,Reward Title,Reward Requirement,Reward Image,Reward Rules,Target`, where Reward Image
 * names an uploaded file part and Reward Rules holds the spec's wording. Pure: the caller has read
 * the multipart body; this checks every row and says what is wrong with each (paths like
 * `rows[3].Reward Rules`, rows counted from 0 after the header), or gives every challenge.
 * Cells are text and stay text: `=HYPERLINK(…)` is a title like any other, never evaluated.
 */

export const TEMPLATE_COLUMNS = [
  'Reward Code',
  'Reward Title',
  'Reward Requirement',
  'Reward Image',
  'Reward Rules',
  'Target',
] as const;
type Column = (typeof TEMPLATE_COLUMNS)[number];

export const MAX_TEMPLATE_ROWS = 1000;
export const LIMITS = { rewardCode: 128, rewardTitle: 200, rewardRequirement: 2000 };

export interface UploadedFile {
  /** The multipart field name. */
  field: string;
  filename: string | null;
  bytes: Buffer;
}

export interface TemplateChallenge {
  rewardCode: string;
  rewardTitle: string;
  rewardRequirement: string;
  image: Buffer;
  rule: { type: RuleType; target: number };
}

export type TemplateResult =
  | { ok: true; challenges: TemplateChallenge[] }
  | { ok: false; errors: FieldError[]; onlyImages: boolean };

const MAX_ERRORS = 200;

function parseCsv(text: string): { record: string[]; line: number }[] | string {
  try {
    const rows = parse(text, {
      bom: true,
      relax_column_count: true,
      skip_empty_lines: true,
      info: true,
    }) as unknown as { record: string[]; info: { lines: number } }[];
    return rows.map((r) => ({ record: r.record, line: r.info.lines }));
  } catch (err) {
    return err instanceof Error ? err.message : 'the CSV cannot be parsed';
  }
}

/** Finds the part a Reward Image cell names: by field name first, else by file name. */
function findImage(files: UploadedFile[], name: string): UploadedFile | string {
  const byField = files.filter((f) => f.field === name);
  if (byField.length === 1) return byField[0];
  if (byField.length > 1) return `names ${byField.length} uploaded parts; give each image its own name`;
  const byFilename = files.filter((f) => f.filename === name);
  if (byFilename.length === 1) return byFilename[0];
  if (byFilename.length > 1) return `names ${byFilename.length} uploaded files; give each image its own name`;
  return `names no uploaded file part ("${name}")`;
}

export function readTemplate(text: string, files: UploadedFile[], takenCodes: Set<string>): TemplateResult {
  const parsed = parseCsv(text);
  if (typeof parsed === 'string') {
    return {
      ok: false,
      errors: [{ path: 'template', message: `is not valid CSV: ${parsed}` }],
      onlyImages: false,
    };
  }
  const [header, ...rows] = parsed;
  const expected = TEMPLATE_COLUMNS.join(',');
  if (!header) return { ok: false, errors: [{ path: 'template', message: 'is empty' }], onlyImages: false };
  const index = new Map<Column, number>();
  const headerErrors: FieldError[] = [];
  header.record.forEach((raw, i) => {
    const name = TEMPLATE_COLUMNS.find((c) => c.toLowerCase() === raw.trim().toLowerCase());
    if (!name)
      headerErrors.push({
        path: 'template.header',
        message: `unknown column "${raw}"; expected ${expected}`,
      });
    else if (index.has(name))
      headerErrors.push({ path: 'template.header', message: `column "${name}" appears twice` });
    else index.set(name, i);
  });
  for (const c of TEMPLATE_COLUMNS) {
    if (!index.has(c)) headerErrors.push({ path: 'template.header', message: `column "${c}" is missing` });
  }
  if (headerErrors.length > 0) return { ok: false, errors: headerErrors, onlyImages: false };
  if (rows.length === 0)
    return { ok: false, errors: [{ path: 'template', message: 'has no challenge rows' }], onlyImages: false };
  if (rows.length > MAX_TEMPLATE_ROWS) {
    return {
      ok: false,
      errors: [
        { path: 'template', message: `has ${rows.length} rows; at most ${MAX_TEMPLATE_ROWS} per import` },
      ],
      onlyImages: false,
    };
  }

  const errors: FieldError[] = [];
  let imageErrors = 0;
  const challenges: TemplateChallenge[] = [];
  const seen = new Map<string, number>();
  rows.forEach(({ record, line }, i) => {
    const at = (c: Column) => `rows[${i}].${c}`;
    const fail = (c: Column, message: string) =>
      errors.push({ path: at(c), message: `${message} (line ${line})` });
    if (record.length !== header.record.length) {
      errors.push({
        path: `rows[${i}]`,
        message: `has ${record.length} cells; the header has ${header.record.length} (line ${line})`,
      });
      return;
    }
    const cell = (c: Column) => record[index.get(c)!].trim();
    const before = errors.length;

    const rewardCode = cell('Reward Code');
    if (rewardCode === '') fail('Reward Code', 'is required');
    else if (rewardCode.length > LIMITS.rewardCode)
      fail('Reward Code', `must be at most ${LIMITS.rewardCode} characters`);
    else if (seen.has(rewardCode)) fail('Reward Code', `repeats rows[${seen.get(rewardCode)}]`);
    else if (takenCodes.has(rewardCode)) fail('Reward Code', 'is already used in this campaign');
    if (rewardCode !== '' && !seen.has(rewardCode)) seen.set(rewardCode, i);

    const rewardTitle = cell('Reward Title');
    if (rewardTitle === '') fail('Reward Title', 'is required');
    else if (rewardTitle.length > LIMITS.rewardTitle)
      fail('Reward Title', `must be at most ${LIMITS.rewardTitle} characters`);

    const rewardRequirement = cell('Reward Requirement');
    if (rewardRequirement === '') fail('Reward Requirement', 'is required');
    else if (rewardRequirement.length > LIMITS.rewardRequirement) {
      fail('Reward Requirement', `must be at most ${LIMITS.rewardRequirement} characters`);
    }

    const ruleText = cell('Reward Rules');
    const type = ruleFromWording(ruleText);
    if (!type) {
      const allowed = Object.values(RULE_WORDING).join('; ');
      fail(
        'Reward Rules',
        ruleText === ''
          ? `is required; one of: ${allowed}`
          : `unknown rule "${ruleText}"; one of: ${allowed}`,
      );
    }

    const targetText = cell('Target');
    const target = /^\d{1,7}$/.test(targetText) ? Number(targetText) : Number.NaN;
    if (!(target >= TARGET_MIN && target <= TARGET_MAX)) {
      fail('Target', `must be a whole number from ${TARGET_MIN} to ${TARGET_MAX}`);
    }

    const imageName = cell('Reward Image');
    let image: Buffer | null = null;
    if (imageName === '') fail('Reward Image', 'is required: the name of an uploaded JPEG part');
    else {
      const found = findImage(files, imageName);
      if (typeof found === 'string') fail('Reward Image', found);
      else {
        const check = checkRewardImage(found.bytes);
        if (check.ok) image = found.bytes;
        else {
          imageErrors++;
          fail('Reward Image', `invalid image "${imageName}": ${check.reason}`);
        }
      }
    }
    if (errors.length === before && type && image) {
      challenges.push({ rewardCode, rewardTitle, rewardRequirement, image, rule: { type, target } });
    }
  });
  if (errors.length > 0) {
    return { ok: false, errors: errors.slice(0, MAX_ERRORS), onlyImages: imageErrors === errors.length };
  }
  return { ok: true, challenges };
}
