/**
 * Reward images (CONTRACT §7): a JPEG of exactly 200×200, judged from its header alone by the shared
 * reader (`images/header.ts`, also used for screenshots) — no decoder ever runs on tenant input, so a
 * decompression bomb has nothing to explode in.
 */
import { isPng, readJpegHeader } from '../../images/header.ts';

export const REWARD_IMAGE_SIZE = 200;
/** A 200×200 JPEG is a few tens of KiB; anything near this is not one a viewer app needs. */
export const MAX_IMAGE_BYTES = 1024 * 1024;

export type ImageCheck = { ok: true } | { ok: false; reason: string };

export function checkRewardImage(bytes: Uint8Array): ImageCheck {
  if (bytes.length === 0) return { ok: false, reason: 'the image is empty' };
  if (bytes.length > MAX_IMAGE_BYTES)
    return { ok: false, reason: `the image is larger than ${MAX_IMAGE_BYTES} bytes` };
  if (isPng(bytes)) return { ok: false, reason: 'the image is a PNG; a JPEG is required' };
  const header = readJpegHeader(bytes);
  if (!header.ok) return header;
  if (header.width !== REWARD_IMAGE_SIZE || header.height !== REWARD_IMAGE_SIZE) {
    return {
      ok: false,
      reason: `the image is ${header.width}×${header.height}; it must be exactly ${REWARD_IMAGE_SIZE}×${REWARD_IMAGE_SIZE}`,
    };
  }
  return { ok: true };
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]*$/;
const DATA_URL = /^data:image\/(jpeg|jpg);base64,/i;

/**
 * The bytes of a base64 image as sent in JSON (standard or URL-safe alphabet, optional padding,
 * whitespace ignored, an optional `data:image/jpeg;base64,` prefix).
 */
export function decodeBase64Image(text: string): { ok: true; bytes: Buffer } | { ok: false; reason: string } {
  const body = text.replace(DATA_URL, '').replace(/\s+/g, '');
  if (body.length > Math.ceil(MAX_IMAGE_BYTES / 3) * 4 + 4) {
    return { ok: false, reason: `the image is larger than ${MAX_IMAGE_BYTES} bytes` };
  }
  const padded = BASE64.test(body) && (body.length % 4 === 0 || !body.includes('='));
  if (body.length % 4 !== 1 && padded) return { ok: true, bytes: Buffer.from(body, 'base64') };
  if (body.length % 4 !== 1 && BASE64URL.test(body))
    return { ok: true, bytes: Buffer.from(body, 'base64url') };
  return { ok: false, reason: 'the image is not valid base64' };
}
