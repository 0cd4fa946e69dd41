import { describe, expect, it } from 'vitest';
import { greyJpeg } from '../../test/helpers/jpeg.ts';
import { GIF, greyPng } from '../../test/helpers/png.ts';
import { readImageHeader, readPngHeader } from './header.ts';

const png = greyPng(320, 180);

describe('image headers', () => {
  it('reads the format and size of a JPEG and of a PNG', () => {
    expect(readImageHeader(greyJpeg(640, 360))).toEqual({
      ok: true,
      format: 'jpeg',
      contentType: 'image/jpeg',
      width: 640,
      height: 360,
    });
    expect(readImageHeader(png)).toEqual({
      ok: true,
      format: 'png',
      contentType: 'image/png',
      width: 320,
      height: 180,
    });
  });

  /** A copy of the PNG with IHDR's width set (and its CRC left as it was, unless `fixCrc`). */
  function pngWithWidth(width: number) {
    const out = Buffer.from(png);
    out.writeUInt32BE(width, 16);
    return out;
  }

  it.each([
    ['empty', Buffer.alloc(0), /empty/],
    ['a GIF', GIF, /GIF/],
    ['text', Buffer.from('hello, world'), /neither a JPEG nor a PNG/],
    ['a truncated PNG', png.subarray(0, png.length - 20), /truncated|longer/],
    ['a PNG cut inside its header', png.subarray(0, 20), /truncated/],
    ['a PNG whose header lies (CRC)', pngWithWidth(100_000), /CRC/],
    ['a truncated JPEG', greyJpeg(64, 64).subarray(0, 40), /truncated|ends|longer/],
    ['garbage after a PNG signature', Buffer.concat([png.subarray(0, 8), Buffer.alloc(64, 0x41)]), /IHDR/],
  ])('refuses %s', (_name, bytes, reason) => {
    const read = readImageHeader(bytes);
    expect(read.ok).toBe(false);
    if (!read.ok) expect(read.reason).toMatch(reason);
  });

  it('refuses a PNG without image data or with a chunk running past the end', () => {
    const iend = png.subarray(png.length - 12);
    const noData = Buffer.concat([png.subarray(0, 33), iend]);
    expect(readPngHeader(noData)).toMatchObject({ ok: false, reason: /IDAT/ });
    const long = Buffer.from(png);
    long.writeUInt32BE(0x7fff_0000, 33); // IDAT's length
    expect(readPngHeader(long)).toMatchObject({ ok: false, reason: /longer than the file/ });
  });
});
