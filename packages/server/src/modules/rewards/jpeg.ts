/**
 * Reward images (CONTRACT §7): a JPEG of exactly 200×200, judged from its header alone — no
 * decoder ever runs on tenant input, so a decompression bomb has nothing to explode in. The marker
 * segments are walked by hand up to the start of the scan; the frame header gives the size.
 */

export const REWARD_IMAGE_SIZE = 200;
/** A 200×200 JPEG is a few tens of KiB; anything near this is not one a viewer app needs. */
export const MAX_IMAGE_BYTES = 1024 * 1024;

export type ImageCheck = { ok: true } | { ok: false; reason: string };

const SOI = 0xd8;
const EOI = 0xd9;
const SOS = 0xda;
/** Baseline, extended sequential and progressive Huffman frames: what every viewer decodes. */
const SUPPORTED_FRAMES = new Set([0xc0, 0xc1, 0xc2]);

function isFrameMarker(m: number) {
  // SOF0–SOF15 except DHT (C4), JPG (C8) and DAC (CC).
  return m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc;
}

/** Markers without a length: TEM and the restart markers. */
function isStandalone(m: number) {
  return m === 0x01 || (m >= 0xd0 && m <= 0xd7);
}

const fail = (reason: string): ImageCheck => ({ ok: false, reason });

export function checkRewardImage(bytes: Uint8Array): ImageCheck {
  if (bytes.length === 0) return fail('the image is empty');
  if (bytes.length > MAX_IMAGE_BYTES) return fail(`the image is larger than ${MAX_IMAGE_BYTES} bytes`);
  if (bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47) {
    return fail('the image is a PNG; a JPEG is required');
  }
  if (bytes.length < 4 || bytes[0] !== 0xff || bytes[1] !== SOI) return fail('the image is not a JPEG');
  // A file cut short still has a valid header; its end-of-image marker gives it away.
  let end = bytes.length;
  while (end > 2 && bytes[end - 1] === 0x00) end--; // some encoders pad with zeros
  if (bytes[end - 2] !== 0xff || bytes[end - 1] !== EOI)
    return fail('the JPEG is truncated (no end-of-image marker)');

  let pos = 2;
  let frame: { width: number; height: number } | null = null;
  for (;;) {
    if (pos >= end) return fail('the JPEG ends before its image data');
    if (bytes[pos] !== 0xff) return fail('the JPEG header is corrupt (expected a marker)');
    while (pos < end && bytes[pos] === 0xff) pos++; // fill bytes
    if (pos >= end) return fail('the JPEG ends before its image data');
    const marker = bytes[pos++];
    if (isStandalone(marker)) continue;
    if (marker === SOI || marker === EOI) return fail('the JPEG header is corrupt (unexpected marker)');
    if (pos + 2 > end) return fail('the JPEG is truncated inside a header segment');
    const length = (bytes[pos] << 8) | bytes[pos + 1];
    if (length < 2 || pos + length > end) return fail('the JPEG declares a segment longer than the file');
    if (isFrameMarker(marker)) {
      if (frame) return fail('the JPEG has more than one frame header');
      if (!SUPPORTED_FRAMES.has(marker)) return fail('the JPEG uses a coding viewers do not decode');
      if (length < 8) return fail('the JPEG frame header is too short');
      const height = (bytes[pos + 3] << 8) | bytes[pos + 4];
      const width = (bytes[pos + 5] << 8) | bytes[pos + 6];
      const components = bytes[pos + 7];
      if (components < 1 || components > 4 || length !== 8 + 3 * components) {
        return fail('the JPEG frame header is corrupt');
      }
      frame = { width, height };
    } else if (marker === SOS) {
      if (!frame) return fail('the JPEG has no frame header before its image data');
      if (frame.width !== REWARD_IMAGE_SIZE || frame.height !== REWARD_IMAGE_SIZE) {
        return fail(
          `the image is ${frame.width}×${frame.height}; it must be exactly ${REWARD_IMAGE_SIZE}×${REWARD_IMAGE_SIZE}`,
        );
      }
      return { ok: true };
    }
    pos += length;
  }
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
