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

/** A new UUIDv7 (time-ordered), as the `uuidv7` package makes them, from pooled CSPRNG output. */
export function uuidv7(): string {
  return generator.generate().toString();
}
