import { Readable } from 'node:stream';
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { assertBlobKey, assertContentType, type Blob, type BlobStore } from './blob-store.ts';

export interface S3BlobStoreOptions {
  bucket: string;
  /** Prepended to every key (e.g. `liveline/`); empty by default. */
  prefix: string;
  /** An S3-compatible service's URL (MinIO, R2, …); null for AWS itself. */
  endpoint: string | null;
  region: string;
  /** Path-style URLs (`endpoint/bucket/key`), which most S3-compatible services need. */
  forcePathStyle: boolean;
  /** Explicit credentials; null leaves them to the AWS SDK's default chain (env, profile, role). */
  credentials: { accessKeyId: string; secretAccessKey: string } | null;
}

/**
 * Blobs in an S3 bucket (or any S3-compatible service) through `@aws-sdk/client-s3`: a thin
 * adapter, one request per call. S3 puts are atomic per object, so a reader sees the old object
 * or the new one; a missing key reads as null and deletes without error, as the interface says.
 */
export class S3BlobStore implements BlobStore {
  readonly kind = 's3';
  /** The SDK is loaded on first use: a server keeping blobs on disk never loads it. */
  private sdk: Promise<{ client: S3Client; s3: typeof import('@aws-sdk/client-s3') }> | null = null;

  constructor(private readonly options: S3BlobStoreOptions) {}

  private connect() {
    this.sdk ??= import('@aws-sdk/client-s3').then((s3) => {
      const config: S3ClientConfig = {
        region: this.options.region,
        forcePathStyle: this.options.forcePathStyle,
        ...(this.options.endpoint ? { endpoint: this.options.endpoint } : {}),
        ...(this.options.credentials ? { credentials: this.options.credentials } : {}),
      };
      return { client: new s3.S3Client(config), s3 };
    });
    return this.sdk;
  }

  private keyOf(key: string) {
    assertBlobKey(key);
    return `${this.options.prefix}${key}`;
  }

  async put(key: string, bytes: Uint8Array, contentType: string): Promise<void> {
    assertContentType(contentType);
    const { client, s3 } = await this.connect();
    await client.send(
      new s3.PutObjectCommand({
        Bucket: this.options.bucket,
        Key: this.keyOf(key),
        Body: bytes,
        ContentType: contentType,
        ContentLength: bytes.byteLength,
      }),
    );
  }

  async get(key: string): Promise<Blob | null> {
    const { client, s3 } = await this.connect();
    try {
      const answer = await client.send(
        new s3.GetObjectCommand({ Bucket: this.options.bucket, Key: this.keyOf(key) }),
      );
      if (!(answer.Body instanceof Readable)) throw new Error('S3 answered without a body stream');
      return {
        stream: answer.Body,
        contentType: answer.ContentType ?? 'application/octet-stream',
        size: Number(answer.ContentLength ?? 0),
      };
    } catch (err) {
      if (err instanceof s3.NoSuchKey || (err as { name?: string }).name === 'NoSuchKey') return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    const { client, s3 } = await this.connect();
    await client.send(new s3.DeleteObjectCommand({ Bucket: this.options.bucket, Key: this.keyOf(key) }));
  }

  close() {
    void this.sdk?.then(({ client }) => client.destroy());
  }
}
