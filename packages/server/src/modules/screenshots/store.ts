import type { Kysely } from 'kysely';
import type { Database } from '../../storage/index.ts';
import type { ScreenshotsTable } from '../../storage/schema.ts';

export type ScreenshotRow = ScreenshotsTable;

/** A row before its blob is written: pending (`event_id` null) until the event's transaction stores it. */
export function insertPending(db: Kysely<Database>, row: Omit<ScreenshotRow, 'event_id'>) {
  return db
    .insertInto('screenshots')
    .values({ ...row, event_id: null })
    .execute();
}

/** Marks a pending row stored, in the event's transaction; false when the row is gone (swept meanwhile). */
export async function markStored(trx: Kysely<Database>, imageId: string, eventId: string) {
  const result = await trx
    .updateTable('screenshots')
    .set({ event_id: eventId })
    .where('image_id', '=', imageId)
    .where('event_id', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** A session's stored (not pending) image. */
export function findStored(db: Kysely<Database>, sessionId: string, imageId: string) {
  return db
    .selectFrom('screenshots')
    .selectAll()
    .where('image_id', '=', imageId)
    .where('session_id', '=', sessionId)
    .where('event_id', 'is not', null)
    .executeTakeFirst();
}

/** The images of some of a session's events (retention deletes those events). */
export function ofEvents(db: Kysely<Database>, sessionId: string, eventIds: string[]) {
  return db
    .selectFrom('screenshots')
    .select(['image_id', 'tenant_id', 'session_id'])
    .where('session_id', '=', sessionId)
    .where('event_id', 'in', eventIds)
    .execute();
}

/** Rows pending since before `before`: uploads that never got their event. */
export function pendingBefore(db: Kysely<Database>, before: number, limit: number) {
  return db
    .selectFrom('screenshots')
    .select(['image_id', 'tenant_id', 'session_id'])
    .where('event_id', 'is', null)
    .where('created_at', '<', before)
    .orderBy('created_at')
    .limit(limit)
    .execute();
}

export function remove(db: Kysely<Database>, imageIds: string[]) {
  return db.deleteFrom('screenshots').where('image_id', 'in', imageIds).execute();
}

/** Deletes rows still pending (a row that got its event meanwhile stays). */
export function removePending(db: Kysely<Database>, imageIds: string[]) {
  return db
    .deleteFrom('screenshots')
    .where('image_id', 'in', imageIds)
    .where('event_id', 'is', null)
    .execute();
}

/** Up to `limit` images of these sessions, stored or pending (an erasure deletes them). */
export function ofSessions(db: Kysely<Database>, sessionIds: string[], limit: number) {
  return db
    .selectFrom('screenshots')
    .select(['image_id', 'tenant_id', 'session_id'])
    .where('session_id', 'in', sessionIds)
    .limit(limit)
    .execute();
}

/** A session's stored images, oldest first (`screenshots_session`, then sorted: a session has few). */
export function storedOfSession(db: Kysely<Database>, sessionId: string) {
  return db
    .selectFrom('screenshots')
    .select(['image_id', 'session_id', 'width', 'height', 'created_at', 'content_type'])
    .where('session_id', '=', sessionId)
    .where('event_id', 'is not', null)
    .orderBy('created_at')
    .orderBy('image_id')
    .execute();
}
