import { randomFillSync } from 'node:crypto';
import { V7Generator } from 'uuidv7';

/**
 * Random words for ids, drawn from the CSPRNG a few kilobytes at a time: the `uuidv7` package's
 * default draws eight words per call, and `crypto.getRandomValues` per two ids was ~4 % of a
 * command's CPU (a request id and a command id each).
 */
class PooledRandom {
  private readonly pool = new Uint32Array(1024);
  private next = this.pool.length;

  nextUint32(): number {
    if (this.next === this.pool.length) {
      randomFillSync(this.pool);
      this.next = 0;
    }
    return this.pool[this.next++];
  }
}

const generator = new V7Generator(new PooledRandom());

/** The ASCII codes of the hex digits; where each of the 16 bytes' two digits go in the text. */
const DIGITS = Buffer.from('0123456789abcdef', 'latin1');
const AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
/** The 8-4-4-4-12 text, hyphens in place, rewritten for each id. */
const text = Buffer.alloc(36, '-');

/**
 * A new UUIDv7 (time-ordered), as the `uuidv7` package makes them, from pooled CSPRNG output.
 * Written out here as one flat string: the package's `toString` appends 36 pieces, a chain of ~1 KiB
 * of string objects per id that V8 then flattens when the id is hashed or written (an id per command
 * and per event).
 */
export function uuidv7(): string {
  const { bytes } = generator.generate();
  for (let i = 0; i < 16; i++) {
    text[AT[i]] = DIGITS[bytes[i] >>> 4];
    text[AT[i] + 1] = DIGITS[bytes[i] & 0xf];
  }
  return text.toString('latin1', 0, 36);
}
