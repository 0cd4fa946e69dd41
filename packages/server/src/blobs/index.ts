import path from 'node:path';
import type { BlobStore } from './blob-store.ts';
import { FsBlobStore } from './fs-blob-store.ts';
import { S3BlobStore, type S3BlobStoreOptions } from './s3-blob-store.ts';

export { assertBlobKey, type Blob, type BlobStore } from './blob-store.ts';
export { FsBlobStore } from './fs-blob-store.ts';
export { S3BlobStore, type S3BlobStoreOptions } from './s3-blob-store.ts';

/** What `openBlobStore` reads of the configuration. */
export interface BlobConfig {
  dataDir: string;
  /** Set (LIVELINE_BLOB_S3_BUCKET): blobs go to S3; null: to `<dataDir>/blobs`. */
  s3: S3BlobStoreOptions | null;
}

/** The deployment's blob store: S3 when a bucket is configured, else files under the data directory. */
export function openBlobStore(config: BlobConfig): BlobStore & { close?(): void } {
  if (config.s3) return new S3BlobStore(config.s3);
  return new FsBlobStore(path.join(config.dataDir, 'blobs'));
}
