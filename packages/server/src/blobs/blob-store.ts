import type { Readable } from 'node:stream';

/** A stored blob as read back: its bytes as a stream, its content type and its size in bytes. */
export interface Blob {
  stream: Readable;
  contentType: string;
  size: number;
}

/**
 * Where large binary objects (screenshots) live, beside the database rather than in it. Keys are
 * paths of `[A-Za-z0-9._-]` segments joined by `/` (no `.` or `..` segment), chosen by the caller.
 * `put` replaces a blob of the same key whole (a reader sees the old bytes or the new, never a mix);
 * `get` of a missing key is null; `delete` of a missing key is no error.
 */
export interface BlobStore {
  /** Short name for logs and /readyz-like reports: `filesystem` or `s3`. */
  readonly kind: string;
  put(key: string, bytes: Uint8Array, contentType: string): Promise<void>;
  get(key: string): Promise<Blob | null>;
  delete(key: string): Promise<void>;
}

const SEGMENT = /^[A-Za-z0-9._-]{1,200}$/;

/** Throws for a key the stores do not take (empty, too long, `..`, odd characters). */
export function assertBlobKey(key: string): void {
  const segments = key.split('/');
  const ok =
    key.length <= 1024 &&
    segments.every((s) => SEGMENT.test(s) && s !== '.' && s !== '..' && !s.endsWith('.tmp'));
  if (!ok) throw new Error(`not a blob key: ${JSON.stringify(key)}`);
}

/** A content type as stored: `type/subtype` with no parameters, at most 127 characters. */
export function assertContentType(contentType: string): void {
  if (!/^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/i.test(contentType) || contentType.length > 127) {
    throw new Error(`not a content type: ${JSON.stringify(contentType)}`);
  }
}
