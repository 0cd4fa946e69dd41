import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { assertBlobKey, assertContentType, type Blob, type BlobStore } from './blob-store.ts';

/**
 * Blobs as files under one directory (`<LIVELINE_DATA_DIR>/blobs` by default), for the embedded
 * server and any single-machine deployment, SQLite or PostgreSQL alike. Directories are created
 * 0700 and files 0600, like the database's. Each file holds one line with its content type, then
 * the bytes. A put writes a temporary file, fsyncs it and renames it over the key, so a crash
 * leaves the old blob or the new one (and at worst a `.tmp` file, never read). Everything goes
 * through `fs/promises` (libuv's thread pool): no disk wait on the event loop.
 */
export class FsBlobStore implements BlobStore {
  readonly kind = 'filesystem';

  constructor(readonly root: string) {}

  private pathOf(key: string) {
    assertBlobKey(key);
    return path.join(this.root, ...key.split('/'));
  }

  async put(key: string, bytes: Uint8Array, contentType: string): Promise<void> {
    assertContentType(contentType);
    const file = this.pathOf(key);
    await fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
    const handle = await fsp.open(tmp, 'wx', 0o600);
    try {
      await handle.writeFile(Buffer.concat([Buffer.from(`${contentType}\n`), bytes]));
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await fsp.rename(tmp, file);
    } catch (err) {
      await fsp.rm(tmp, { force: true });
      throw err;
    }
  }

  async get(key: string): Promise<Blob | null> {
    const file = this.pathOf(key);
    let handle: fsp.FileHandle;
    try {
      handle = await fsp.open(file, 'r');
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
    try {
      const { size } = await handle.stat();
      const head = Buffer.alloc(Math.min(size, 256));
      await handle.read(head, 0, head.length, 0);
      const newline = head.indexOf(0x0a);
      if (newline < 0) throw new Error(`blob ${key} has no content type line`);
      const contentType = head.subarray(0, newline).toString('latin1');
      const start = newline + 1;
      // The stream owns the open file from here (it closes it): a delete meanwhile cannot cut it short.
      const stream = handle.createReadStream({ start, autoClose: true });
      return { stream, contentType, size: size - start };
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await fsp.rm(this.pathOf(key), { force: true });
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
  }
}

/** No file at the key: nothing there, or a file where one of its directories should be. */
function isMissing(err: unknown) {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
