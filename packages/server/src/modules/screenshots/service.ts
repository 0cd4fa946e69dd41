import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { BlobStore } from '../../blobs/index.ts';
import type { Clock } from '../../clock.ts';
import { problems } from '../../http/problem.ts';
import { uuidv7 } from '../../ids.ts';
import { readImageHeader } from '../../images/header.ts';
import type { Job } from '../../jobs.ts';
import type { Database, Storage } from '../../storage/index.ts';
import * as store from './store.ts';

/** The session an upload names, as the events module takes it. */
export interface ScreenshotSession {
  sessionId: string;
  tenantId: string;
  tenantCohortId: string | null;
}

/**
 * How a `Screenshot` event is written: the events module's `emitIn` (the one write path: its
 * webhook outbox rows in the same transaction, the live tail reads it from the store). Structural,
 * so this module does not import the events module.
 */
export interface ScreenshotEvents {
  emitIn(
    trx: Kysely<Database>,
    session: ScreenshotSession,
    eventType: string,
    fields: Record<string, unknown>,
  ): Promise<Record<string, unknown>>;
}

/** One upload as the route read it. */
export interface ScreenshotUpload {
  bytes: Buffer;
  /** The part's declared content type (`image/jpeg`, `image/png`, `application/octet-stream`, …). */
  declaredType: string;
  streamingSessionId: string | null;
}

export interface ScreenshotsOptions {
  /** Largest image, in bytes (LIVELINE_SCREENSHOT_MAX_BYTES). */
  maxBytes: number;
}

/** An upload whose event never committed is deleted by the sweep after this long. */
export const PENDING_UPLOAD_TTL_MS = 3600_000;
/** How often the sweep of unfinished uploads runs. */
export const ORPHAN_SWEEP_EVERY_MS = 10 * 60_000;
const ORPHAN_PAGE = 500;

/** Declared part types that say nothing about the format: the bytes decide. */
const UNLABELLED = new Set(['application/octet-stream', '']);
/** Names a declared type may use for each format. */
const DECLARED: Record<string, string> = {
  'image/jpeg': 'image/jpeg',
  'image/jpg': 'image/jpeg',
  'image/pjpeg': 'image/jpeg',
  'image/png': 'image/png',
};

/** Where an image's bytes live in the blob store. */
export function blobKey(row: { tenant_id: string; session_id: string; image_id: string }) {
  return `screenshots/${row.tenant_id}/${row.session_id}/${row.image_id}`;
}

/**
 * Screenshots (CONTRACT §14): a device's upload becomes an image in the blob store and a
 * `Screenshot` event, in one step as far as anyone can see: the row (pending), then the blob, then
 * — in one transaction — the event (through the events module's write path) and the row marked
 * stored. If the event's transaction fails the blob and the row are deleted at once; if the process
 * dies in between, the row stays pending and the sweep (`screenshots.orphans`) deletes both after
 * an hour. The tenant reads only stored images; retention deletes an event's image with the event.
 */
export class ScreenshotsService {
  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly blobs: BlobStore,
    private readonly events: ScreenshotEvents,
    private readonly logger: Logger,
    readonly options: ScreenshotsOptions,
  ) {}

  /** Stores an uploaded image and its `Screenshot` event; returns the event as stored. */
  async upload(session: ScreenshotSession, upload: ScreenshotUpload): Promise<Record<string, unknown>> {
    const header = readImageHeader(upload.bytes);
    if (!header.ok) throw invalidImage(header.reason);
    const declared = upload.declaredType.toLowerCase();
    if (!UNLABELLED.has(declared) && DECLARED[declared] !== header.contentType) {
      throw invalidImage(
        `the part says ${declared || 'nothing'} but the image is a ${header.format.toUpperCase()}`,
      );
    }
    const row = {
      image_id: uuidv7(),
      tenant_id: session.tenantId,
      session_id: session.sessionId,
      content_type: header.contentType,
      width: header.width,
      height: header.height,
      size_bytes: upload.bytes.length,
      created_at: this.clock.now(),
    };
    const key = blobKey(row);
    await store.insertPending(this.storage.db, row);
    try {
      await this.blobs.put(key, upload.bytes, header.contentType);
      return await this.storage.db.transaction().execute(async (trx) => {
        const fields: Record<string, unknown> = {
          imageId: row.image_id,
          width: row.width,
          height: row.height,
        };
        if (upload.streamingSessionId) fields.streamingSessionId = upload.streamingSessionId;
        const event = await this.events.emitIn(trx, session, 'Screenshot', fields);
        // The row went meanwhile: the player was erased (its sessions with it), or the upload outlived
        // the orphan sweep. Either way the session is gone for this upload: 404, as after the erasure.
        if (!(await store.markStored(trx, row.image_id, String(event.id))))
          throw problems.notFound('session');
        return event;
      });
    } catch (err) {
      await this.discard([row]);
      throw err;
    }
  }

  /** A stored image of a session (the caller checked the session is the tenant's); null when there is none. */
  async image(sessionId: string, imageId: string) {
    const row = await store.findStored(this.storage.db, sessionId, imageId);
    if (!row) return null;
    const blob = await this.blobs.get(blobKey(row));
    return blob && { ...blob, row };
  }

  /**
   * Retention (the events module's `onDeleting` hook): the images of events about to be deleted go
   * first — blob, then row — so a crash leaves at most an event whose image is gone, never an image
   * nobody can reach. The next sweep deletes those events again.
   */
  async forgetEvents(sessionId: string, eventIds: string[]): Promise<number> {
    const rows = await store.ofEvents(this.storage.db, sessionId, eventIds);
    for (const row of rows) await this.blobs.delete(blobKey(row));
    if (rows.length > 0)
      await store.remove(
        this.storage.db,
        rows.map((r) => r.image_id),
      );
    return rows.length;
  }

  /**
   * Erasure (the players module): up to `limit` images of these sessions, stored or pending — blob,
   * then row, as retention does; how many went. An upload finishing meanwhile finds its row gone,
   * deletes its own blob (`upload`'s discard) and answers 404.
   */
  async eraseSessions(sessionIds: string[], limit: number): Promise<number> {
    if (sessionIds.length === 0) return 0;
    const rows = await store.ofSessions(this.storage.db, sessionIds, limit);
    for (const row of rows) await this.blobs.delete(blobKey(row));
    if (rows.length > 0)
      await store.remove(
        this.storage.db,
        rows.map((r) => r.image_id),
      );
    return rows.length;
  }

  /** A session's stored images (the player export's references). */
  ofSession(sessionId: string) {
    return store.storedOfSession(this.storage.db, sessionId);
  }

  /** Deletes uploads pending for more than an hour (their event never committed): blob, then row. */
  async sweepOrphans(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const rows = await store.pendingBefore(
        this.storage.db,
        this.clock.now() - PENDING_UPLOAD_TTL_MS,
        ORPHAN_PAGE,
      );
      for (const row of rows) await this.blobs.delete(blobKey(row));
      if (rows.length > 0)
        await store.removePending(
          this.storage.db,
          rows.map((r) => r.image_id),
        );
      deleted += rows.length;
      if (rows.length < ORPHAN_PAGE) return deleted;
    }
  }

  /** Best effort after a failed upload: what is left is the sweep's. */
  private async discard(rows: store.ScreenshotRow[] | Omit<store.ScreenshotRow, 'event_id'>[]) {
    for (const row of rows) {
      try {
        await this.blobs.delete(blobKey(row));
        await store.removePending(this.storage.db, [row.image_id]);
      } catch (err) {
        this.logger.warn({ err, imageId: row.image_id }, 'a failed screenshot upload was left for the sweep');
      }
    }
  }
}

function invalidImage(reason: string) {
  return problems.invalidImage(`The screenshot was refused: ${reason}.`, [
    { path: 'image', message: reason },
  ]);
}

/** The sweep of unfinished uploads as a job (`jobs.ts`): every 10 minutes. */
export function screenshotOrphansJob(screenshots: ScreenshotsService, logger: Logger): Job {
  return {
    name: 'screenshots.orphans',
    everyMs: ORPHAN_SWEEP_EVERY_MS,
    async run() {
      const deleted = await screenshots.sweepOrphans();
      if (deleted > 0) logger.info({ deleted }, 'unfinished screenshot uploads deleted');
      return { deleted };
    },
  };
}
