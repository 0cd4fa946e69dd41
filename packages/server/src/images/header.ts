/**
 * Image headers, read by hand: the format and the pixel size of a JPEG (its frame header, SOF) or a
 * PNG (its IHDR chunk), judged from the bytes alone — no decoder ever runs on what a tenant or a
 * device sends, so a decompression bomb has nothing to explode in. Used by the reward images
 * (modules/rewards) and the device's screenshots (modules/screenshots).
 *
 * Both readers also walk the file's structure to its end (JPEG markers up to the scan and the
 * end-of-image marker; every PNG chunk up to IEND), so a file cut short or with a length that runs
 * past its end is refused, whatever its header says.
 */
import { crc32 } from 'node:zlib';

export type ImageFormat = 'jpeg' | 'png';

export const IMAGE_CONTENT_TYPES: Record<ImageFormat, string> = {
  jpeg: 'image/jpeg',
  png: 'image/png',
};

export interface ImageHeader {
  format: ImageFormat;
  contentType: string;
  width: number;
  height: number;
}

export type ImageRead = ({ ok: true } & ImageHeader) | { ok: false; reason: string };

const fail = (reason: string): ImageRead => ({ ok: false, reason });

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

export function isPng(bytes: Uint8Array): boolean {
  return bytes.length >= 8 && PNG_SIGNATURE.every((b, i) => bytes[i] === b);
}

export function isJpeg(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xd8;
}

/** A JPEG or a PNG, with its size from its header; anything else (GIF, WebP, text, garbage) is refused. */
export function readImageHeader(bytes: Uint8Array): ImageRead {
  if (bytes.length === 0) return fail('the image is empty');
  if (isPng(bytes)) return readPngHeader(bytes);
  if (isJpeg(bytes)) return readJpegHeader(bytes);
  if (bytes.length >= 6 && String.fromCharCode(...bytes.subarray(0, 3)) === 'GIF') {
    return fail('the image is a GIF; a JPEG or a PNG is required');
  }
  return fail('the image is neither a JPEG nor a PNG');
}

// --- JPEG ---------------------------------------------------------------------------------------

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

/**
 * A JPEG's marker segments walked up to the start of the scan; the (one) frame header gives the
 * size. A file without its end-of-image marker (zero padding after it is allowed), a segment longer
 * than the file, a second frame or a coding other than Huffman baseline/extended/progressive is refused.
 */
export function readJpegHeader(bytes: Uint8Array): ImageRead {
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
      if (frame.width === 0 || frame.height === 0) {
        return fail(`the image is ${frame.width}×${frame.height}; both sides must be at least 1 pixel`);
      }
      return { ok: true, format: 'jpeg', contentType: IMAGE_CONTENT_TYPES.jpeg, ...frame };
    }
    pos += length;
  }
}

// --- PNG ----------------------------------------------------------------------------------------

/** The largest side PNG allows (2^31 − 1). */
const PNG_MAX_SIDE = 0x7fffffff;
/** Bit depths allowed for each colour type (PNG §11.2.2). */
const PNG_DEPTHS: Record<number, number[]> = {
  0: [1, 2, 4, 8, 16],
  2: [8, 16],
  3: [1, 2, 4, 8],
  4: [8, 16],
  6: [8, 16],
};

const chunkType = (bytes: Uint8Array, at: number) => String.fromCharCode(...bytes.subarray(at, at + 4));
const u32 = (bytes: Uint8Array, at: number) =>
  ((bytes[at] << 24) | (bytes[at + 1] << 16) | (bytes[at + 2] << 8) | bytes[at + 3]) >>> 0;

/**
 * A PNG's chunks walked to IEND: IHDR first (13 bytes, checked CRC, sane depth and colour type, sides
 * 1 to 2^31 − 1), at least one IDAT, every chunk inside the file, IEND last. The image data itself is
 * never inflated.
 */
export function readPngHeader(bytes: Uint8Array): ImageRead {
  if (!isPng(bytes)) return fail('the image is not a PNG');
  if (bytes.length < 8 + 25) return fail('the PNG is truncated inside its header');
  if (u32(bytes, 8) !== 13 || chunkType(bytes, 12) !== 'IHDR')
    return fail('the PNG does not start with IHDR');
  if (crc32(bytes.subarray(12, 12 + 17)) !== u32(bytes, 29)) return fail('the PNG header is corrupt (CRC)');
  const width = u32(bytes, 16);
  const height = u32(bytes, 20);
  const depth = bytes[24];
  const colour = bytes[25];
  if (width === 0 || height === 0 || width > PNG_MAX_SIDE || height > PNG_MAX_SIDE) {
    return fail(`the image is ${width}×${height}; both sides must be 1 to ${PNG_MAX_SIDE} pixels`);
  }
  if (!PNG_DEPTHS[colour]?.includes(depth)) return fail('the PNG header is corrupt (colour type, bit depth)');
  if (bytes[26] !== 0 || bytes[27] !== 0 || bytes[28] > 1) return fail('the PNG header is corrupt');
  let pos = 33;
  let sawData = false;
  for (;;) {
    if (pos + 12 > bytes.length) return fail('the PNG is truncated (no IEND chunk)');
    const length = u32(bytes, pos);
    const type = chunkType(bytes, pos + 4);
    if (!/^[A-Za-z]{4}$/.test(type)) return fail('the PNG is corrupt (a chunk type is not letters)');
    if (length > PNG_MAX_SIDE || pos + 12 + length > bytes.length) {
      return fail('the PNG declares a chunk longer than the file');
    }
    if (type === 'IHDR') return fail('the PNG has more than one IHDR');
    if (type === 'IDAT') sawData = true;
    pos += 12 + length;
    if (type === 'IEND') {
      if (!sawData) return fail('the PNG has no image data (IDAT)');
      return { ok: true, format: 'png', contentType: IMAGE_CONTENT_TYPES.png, width, height };
    }
  }
}
