import { randomUUID } from 'node:crypto';
import { buffer } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlobStore } from '../../src/blobs/index.ts';

/**
 * The behaviour every blob store must have (the filesystem one and the S3 one), written once and run
 * against each: put then get gives the same bytes and type, a put replaces, a missing key reads as
 * null, delete is idempotent, keys that could escape their store are refused.
 */
export function blobStoreContract(
  name: string,
  open: () => Promise<{ store: BlobStore; close(): Promise<void> }>,
) {
  describe(`blob store contract: ${name}`, () => {
    let store: BlobStore;
    let close: () => Promise<void>;
    beforeAll(async () => {
      ({ store, close } = await open());
    });
    afterAll(async () => close?.());

    const key = () => `screenshots/t/${randomUUID()}/${randomUUID()}`;

    it('gives back what was put: the same bytes, type and size', async () => {
      const k = key();
      const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
      await store.put(k, bytes, 'image/png');
      const blob = await store.get(k);
      expect(blob).not.toBeNull();
      expect(blob?.contentType).toBe('image/png');
      expect(blob?.size).toBe(bytes.length);
      expect((await buffer(blob!.stream)).equals(bytes)).toBe(true);
    });

    it('replaces a blob put again under its key', async () => {
      const k = key();
      await store.put(k, Buffer.from('first'), 'image/png');
      await store.put(k, Buffer.from('second one'), 'image/jpeg');
      const blob = await store.get(k);
      expect(blob?.contentType).toBe('image/jpeg');
      expect((await buffer(blob!.stream)).toString()).toBe('second one');
    });

    it('reads a missing key as null, and deletes without error whether it exists or not', async () => {
      const k = key();
      expect(await store.get(k)).toBeNull();
      await store.delete(k);
      await store.put(k, Buffer.from([1, 2, 3]), 'image/jpeg');
      await store.delete(k);
      expect(await store.get(k)).toBeNull();
      await store.delete(k);
    });

    it('keeps an empty blob', async () => {
      const k = key();
      await store.put(k, Buffer.alloc(0), 'image/png');
      const blob = await store.get(k);
      expect(blob?.size).toBe(0);
      expect((await buffer(blob!.stream)).length).toBe(0);
    });

    it('refuses keys that could leave the store, and content types that are not one', async () => {
      for (const bad of ['', '../x', 'a/../b', '/abs', 'a//b', 'a/./b', 'a\\b', 'x y', 'a/b.tmp'])
        await expect(store.put(bad, Buffer.from('x'), 'image/png')).rejects.toThrow(/not a blob key/);
      await expect(store.put(key(), Buffer.from('x'), 'image/png\nX-Evil: 1')).rejects.toThrow(
        /content type/,
      );
    });
  });
}
