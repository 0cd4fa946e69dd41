import { describe, expect, it } from 'vitest';
import { greyJpeg } from '../../../test/helpers/jpeg.ts';
import { checkRewardImage, decodeBase64Image, MAX_IMAGE_BYTES } from './jpeg.ts';

const good = greyJpeg(200, 200);
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000c8000000c80806000000', 'hex');

/** A copy of `jpeg` with the frame header's height and width replaced. */
function withDeclaredSize(jpeg: Buffer, width: number, height: number) {
  const out = Buffer.from(jpeg);
  const sof = out.indexOf(Buffer.from([0xff, 0xc0]));
  out.writeUInt16BE(height, sof + 5);
  out.writeUInt16BE(width, sof + 7);
  return out;
}

describe('reward images', () => {
  it('accepts a 200×200 JPEG', () => {
    expect(checkRewardImage(good)).toEqual({ ok: true });
  });

  it('accepts zero padding after the end marker', () => {
    expect(checkRewardImage(Buffer.concat([good, Buffer.alloc(16)]))).toEqual({ ok: true });
  });

  it.each([
    ['empty', Buffer.alloc(0), /empty/],
    ['a PNG', PNG, /PNG/],
    ['text', Buffer.from('hello, world'), /not a JPEG/],
    ['other size', greyJpeg(201, 200), /201×200/],
    ['tiny', greyJpeg(8, 8), /8×8/],
    ['an absurd declared size (image bomb)', withDeclaredSize(good, 65535, 65535), /65535×65535/],
    ['a zero height', withDeclaredSize(good, 200, 0), /200×0/],
    ['truncated in the scan', good.subarray(0, good.length - 40), /truncated/],
    ['truncated in the header', good.subarray(0, 30), /truncated|ends|longer/],
    ['only the start marker', Buffer.from([0xff, 0xd8]), /not a JPEG|truncated/],
    ['over the size cap', Buffer.concat([good, Buffer.alloc(MAX_IMAGE_BYTES)]), /larger/],
  ])('rejects %s', (_name, bytes, reason) => {
    const check = checkRewardImage(bytes);
    expect(check.ok).toBe(false);
    if (!check.ok) expect(check.reason).toMatch(reason);
  });

  it('rejects a segment length that runs past the end', () => {
    const bad = Buffer.from(good);
    bad.writeUInt16BE(0xfff0, 4); // the APP0 length
    expect(checkRewardImage(bad)).toMatchObject({ ok: false });
  });

  it('rejects arithmetic or hierarchical coding and second frames', () => {
    const arithmetic = Buffer.from(good);
    arithmetic[arithmetic.indexOf(Buffer.from([0xff, 0xc0])) + 1] = 0xc9;
    expect(checkRewardImage(arithmetic)).toMatchObject({ ok: false });
    const sof = good.indexOf(Buffer.from([0xff, 0xc0]));
    const frame = good.subarray(sof, sof + 2 + 11);
    const twice = Buffer.concat([good.subarray(0, sof), frame, frame, good.subarray(sof + frame.length)]);
    expect(checkRewardImage(twice)).toMatchObject({ ok: false });
  });

  it('decodes base64, base64url and data URLs; refuses anything else', () => {
    for (const text of [
      good.toString('base64'),
      good.toString('base64url'),
      `data:image/jpeg;base64,${good.toString('base64')}`,
    ]) {
      const d = decodeBase64Image(text);
      expect(d.ok && d.bytes.equals(good)).toBe(true);
    }
    expect(decodeBase64Image('not base64 at all!').ok).toBe(false);
    expect(decodeBase64Image('A'.repeat(2 * MAX_IMAGE_BYTES)).ok).toBe(false);
  });
});
