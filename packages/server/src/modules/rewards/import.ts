import { type FieldError, ProblemError, problems } from '../../http/problem.ts';
import type { ChallengesService } from './challenges.ts';
import type { CampaignRow, ChallengeRow } from './store.ts';
import { readTemplate, type UploadedFile } from './template-import.ts';

/** One part of a multipart body, as `@fastify/multipart` yields it (only what the import reads). */
export type ImportPart =
  | { type: 'file'; fieldname: string; filename: string; toBuffer(): Promise<Buffer> }
  | { type: 'field'; fieldname: string; value: unknown };

/** An import request: the template CSV and its images, as multipart/form-data. */
export interface ImportUpload {
  /** Whether the body is multipart at all (else 415). */
  multipart: boolean;
  /** The `content-length` the client declared (0 when none). */
  declaredBytes: number;
  parts(): AsyncIterable<ImportPart>;
}

interface ReadUpload {
  template: string | null;
  files: UploadedFile[];
  /** Complaints about the parts themselves (a stray text field, no template). */
  errors: FieldError[];
}

export interface ImportDeps {
  challenges: ChallengesService;
  /** Largest import, in bytes (also the body limit of a JSON challenge with its image). */
  limitBytes: number;
}

/**
 * `POST /campaigns/{id}/challenges/import`: the template CSV with one file part per image, all or
 * nothing. Any bad row rejects the whole import with per-row errors (`rows[3].Reward Rules`); when
 * every error is an image error the code is `invalid_image`, else `validation_failed`.
 */
export class ChallengeImport {
  readonly limitBytes: number;

  constructor(private readonly deps: ImportDeps) {
    this.limitBytes = deps.limitBytes;
  }

  async importChallenges(campaign: CampaignRow, upload: ImportUpload): Promise<ChallengeRow[]> {
    if (!upload.multipart) {
      throw problems.unsupportedMediaType('Send the template and its images as multipart/form-data.');
    }
    if (upload.declaredBytes > this.limitBytes) throw this.tooLarge();
    const { template, files, errors } = await this.read(upload.parts());
    if (errors.length > 0 || template === null) throw importProblem(errors, false);
    let result = readTemplate(template, files, new Set());
    if (result.ok) {
      // Codes already in the campaign: read again with them, for per-row errors.
      const codes = result.challenges.map((c) => c.rewardCode);
      const taken = await this.deps.challenges.rewardCodesTaken(campaign.campaign_id, codes);
      if (taken.size > 0) result = readTemplate(template, files, taken);
    }
    if (!result.ok) throw importProblem(result.errors, result.onlyImages);
    return this.deps.challenges.createAll(campaign, result.challenges);
  }

  /** The parts, counting their bytes against the limit: the template (file or text field) and the images. */
  private async read(parts: AsyncIterable<ImportPart>): Promise<ReadUpload> {
    const read: ReadUpload = { template: null, files: [], errors: [] };
    let total = 0;
    const count = (n: number) => {
      total += n;
      if (total > this.limitBytes) throw this.tooLarge();
    };
    try {
      for await (const part of parts) {
        if (part.type === 'file') {
          const bytes = await part.toBuffer();
          count(bytes.length);
          if (part.fieldname === 'template') read.template = bytes.toString('utf8');
          else read.files.push({ field: part.fieldname, filename: part.filename || null, bytes });
        } else {
          const value = typeof part.value === 'string' ? part.value : String(part.value);
          count(Buffer.byteLength(value));
          if (part.fieldname === 'template') read.template = value;
          else
            read.errors.push({
              path: part.fieldname,
              message: 'is not an allowed field (images go in file parts)',
            });
        }
      }
    } catch (err) {
      throw multipartProblem(err);
    }
    if (read.template === null)
      read.errors.push({ path: 'template', message: 'is required: the challenge template CSV' });
    return read;
  }

  private tooLarge() {
    return problems.payloadTooLarge(`An import may hold at most ${this.limitBytes} bytes.`);
  }
}

function importProblem(errors: FieldError[], onlyImages: boolean) {
  const first = errors[0];
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
  const detail = `The template was rejected, nothing was imported: ${first.path} ${first.message}${more}.`;
  return onlyImages ? problems.invalidImage(detail, errors) : problems.validation(detail, errors);
}

/** Errors of the multipart reader (busboy, @fastify/multipart) as problem documents. */
function multipartProblem(err: unknown): ProblemError {
  if (err instanceof ProblemError) return err;
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  if (status === 413) return problems.payloadTooLarge('The import is larger than this route accepts.');
  return problems.validation('The request body is not well-formed multipart/form-data.', [
    { path: '', message: 'is not well-formed multipart/form-data' },
  ]);
}
