/**
 * The blob stores against one contract suite (test/contracts/blob-store.contract.ts): the filesystem
 * store in a temporary directory, and the S3 store against a local S3-compatible server (s3rver, a
 * dev dependency, on an ephemeral port: no internet, no credentials).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';
import { describe, expect, it } from 'vitest';
import { FsBlobStore, S3BlobStore } from '../../src/blobs/index.ts';
import { blobStoreContract } from '../contracts/blob-store.contract.ts';

blobStoreContract('filesystem', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-blobs-'));
  return {
    store: new FsBlobStore(path.join(dir, 'blobs')),
    close: async () => fs.rmSync(dir, { recursive: true, force: true }),
  };
});

blobStoreContract('s3 (s3rver)', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-s3rver-'));
  const server = new S3rver({
    port: 0,
    address: '127.0.0.1',
    silent: true,
    directory: dir,
    configureBuckets: [{ name: 'liveline-test', configs: [] }],
  });
  const { port } = await server.run();
  const store = new S3BlobStore({
    bucket: 'liveline-test',
    prefix: 'contract/',
    endpoint: `http://127.0.0.1:${port}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  });
  return {
    store,
    close: async () => {
      store.close();
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe('the filesystem blob store on disk', () => {
  it('creates its directories 0700 and its files 0600, and leaves no temporary file', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-blobs-'));
    try {
      const root = path.join(dir, 'blobs');
      const store = new FsBlobStore(root);
      await store.put('screenshots/t/s/i', Buffer.from('png bytes'), 'image/png');
      expect(fs.statSync(root).mode & 0o777).toBe(0o700);
      expect(fs.statSync(path.join(root, 'screenshots/t/s')).mode & 0o777).toBe(0o700);
      expect(fs.statSync(path.join(root, 'screenshots/t/s/i')).mode & 0o777).toBe(0o600);
      expect(fs.readdirSync(path.join(root, 'screenshots/t/s'))).toEqual(['i']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
