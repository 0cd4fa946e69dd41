import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.ts';
import { ProblemError, problems } from '../../http/problem.ts';
import { uuidv7 } from '../../ids.ts';
import type { Storage } from '../../storage/index.ts';
import type { SessionRow } from '../sessions/index.ts';
import type { BatchRow, RefusalRow } from './batch-store.ts';
import * as batchStore from './batch-store.ts';
import type { CommandStatus, CommandsService } from './service.ts';

/** Where a cohort's live sessions come from (the sessions module's `liveInCohort`). */
export interface CohortSessions {
  liveInCohort(tenantId: string, tenantCohortId: string, limit: number): Promise<SessionRow[]>;
}

export interface BatchOptions {
  /** Most live sessions a batch goes to (CONTRACT §12: 10,000); more → 409 `cohort_too_large`. */
  maxSessions: number;
  /** Commands handed to the command log at once; the event loop is yielded between chunks. */
  chunk: number;
}

export interface BatchInput {
  tenantId: string;
  tenantCohortId: string;
  name: string;
  data: unknown;
  ttlSeconds: number;
  idempotencyKey: string | null;
  requestHash: string | null;
}

/** One session's line in a batch: its command, or why its state refused one. */
export type BatchEntry =
  | { sessionId: string; commandId: string; status: CommandStatus }
  | { sessionId: string; error: { code: string; detail: string } };

export const BATCH_STATUSES = [
  'queued',
  'delivered',
  'acknowledged',
  'failed',
  'expired',
  'cancelled',
] as const satisfies readonly CommandStatus[];

/** How long a retry waits for the first request with its Idempotency-Key to finish its batch. */
const ANSWER_WAIT_MS = 30_000;

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Cohort-wide commands (CONTRACT §12): one command to every live session of a tenant's cohort. Each
 * is the very command of CONTRACT §3 — `CommandsService.issue` with the same validation, the same
 * stream/record compare-and-set, the same group-commit log and delivery over the bus, the same TTL —
 * stamped with the batch's id. A session whose state refuses it gets its own error; the rest go on.
 */
export class CommandBatches {
  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly commands: Pick<CommandsService, 'issue' | 'view'>,
    private readonly sessions: CohortSessions,
    private readonly log: FastifyBaseLogger,
    private readonly options: BatchOptions = { maxSessions: 10_000, chunk: 500 },
  ) {}

  /**
   * Sends the command to the cohort's live sessions and returns the 202 body as text. With an
   * Idempotency-Key the first answer given for it is returned as it was (409
   * `idempotency_key_reused` for another request with the key).
   */
  async send(input: BatchInput): Promise<string> {
    const first = await this.firstAnswer(input);
    if (first !== null) return first;
    const { maxSessions } = this.options;
    const sessions = await this.sessions.liveInCohort(input.tenantId, input.tenantCohortId, maxSessions + 1);
    if (sessions.length > maxSessions) throw problems.cohortTooLarge(maxSessions, `more than ${maxSessions}`);
    const batch: BatchRow = {
      batch_id: uuidv7(),
      tenant_id: input.tenantId,
      tenant_cohort_id: input.tenantCohortId,
      name: input.name,
      issued_at: this.clock.now(),
      total: sessions.length,
      idempotency_key: input.idempotencyKey,
      request_hash: input.requestHash,
      answer: null,
    };
    if (!(await batchStore.insertBatch(this.storage.db, batch))) {
      // A concurrent request with the same key wrote its batch first: its answer is the first one.
      const raced = await this.firstAnswer(input);
      if (raced !== null) return raced;
      throw new Error('a batch with this Idempotency-Key exists but was not found');
    }
    const entries = await this.issueAll(batch, sessions, input);
    return batchStore.keepAnswer(this.storage.db, batch.batch_id, render(batch, entries));
  }

  /**
   * Issues the command to every session, `chunk` at a time: each chunk's commands are handed to the
   * command log in one go (they share a group commit, or a few) and the event loop is yielded
   * before the next, so a cohort of thousands does not hold up other requests; a chunk is being
   * written and delivered while the next is prepared. The refusals are written once all are known.
   */
  private async issueAll(batch: BatchRow, sessions: SessionRow[], input: BatchInput) {
    const issued: Promise<BatchEntry>[] = [];
    for (let i = 0; i < sessions.length; i += this.options.chunk) {
      if (i > 0) await yieldToLoop();
      for (const session of sessions.slice(i, i + this.options.chunk))
        issued.push(this.issueOne(batch, session, input));
    }
    const entries = await Promise.all(issued);
    const refusals: RefusalRow[] = entries.flatMap((e) =>
      'error' in e
        ? [{ batch_id: batch.batch_id, session_id: e.sessionId, code: e.error.code, detail: e.error.detail }]
        : [],
    );
    await batchStore.insertRefusals(this.storage.db, refusals);
    return entries;
  }

  private async issueOne(batch: BatchRow, session: SessionRow, input: BatchInput): Promise<BatchEntry> {
    const sessionId = session.session_id;
    try {
      const view = await this.commands.issue(session, {
        name: input.name,
        data: input.data,
        ttlSeconds: input.ttlSeconds,
        idempotencyKey: null,
        requestHash: null,
        batchId: batch.batch_id,
      });
      return { sessionId, commandId: view.commandId, status: view.status };
    } catch (err) {
      if (err instanceof ProblemError && err.status < 500)
        return { sessionId, error: { code: err.code, detail: err.message } };
      this.log.error({ err, sessionId, batchId: batch.batch_id }, 'a cohort command was not issued');
      return { sessionId, error: { code: 'internal', detail: 'The command could not be issued.' } };
    }
  }

  /**
   * The answer kept for the request's Idempotency-Key: null for a new key (or none). While the first
   * request is still issuing its batch, a retry waits for its answer; when that request's process
   * stopped before answering, the batch as the store has it is the answer (sessions it never reached
   * are absent from the list; `total` still says how many were live).
   */
  private async firstAnswer(input: BatchInput): Promise<string | null> {
    if (!input.idempotencyKey) return null;
    const { db } = this.storage;
    const existing = await batchStore.findBatchByKey(db, input.tenantId, input.idempotencyKey);
    if (!existing) return null;
    if (existing.request_hash !== input.requestHash) throw problems.idempotencyKeyReused();
    const until = performance.now() + ANSWER_WAIT_MS;
    for (let batch: BatchRow | undefined = existing; batch; ) {
      if (batch.answer !== null) return batch.answer;
      if (performance.now() >= until || this.clock.now() - batch.issued_at > 2 * ANSWER_WAIT_MS) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
      batch = await batchStore.findBatch(db, input.tenantId, existing.batch_id);
    }
    const { entries } = await this.storedEntries(existing.batch_id, null, this.options.maxSessions);
    // The 202 says how far delivery got: `queued`, or `delivered` for anything that went further.
    const asAnswered = entries.map((e) =>
      'status' in e && e.status !== 'queued' ? { ...e, status: 'delivered' as const } : e,
    );
    return batchStore.keepAnswer(db, existing.batch_id, render(existing, asAnswered));
  }

  /**
   * The batch as it is now (`GET /cohorts/{id}/realtime/batches/{batchId}`): counts by status from
   * the commands' current rows, and one page of the per-session list in session order (`after`: the
   * last session of the previous page). Null for another tenant's batch, or another cohort's.
   */
  async view(
    tenantId: string,
    tenantCohortId: string,
    batchId: string,
    page: { after: string | null; limit: number },
  ) {
    const { db } = this.storage;
    const batch = await batchStore.findBatch(db, tenantId, batchId);
    if (!batch || batch.tenant_cohort_id !== tenantCohortId) return null;
    const now = this.clock.now();
    const stored = await batchStore.statusCounts(db, batchId, now);
    const counts = Object.fromEntries(BATCH_STATUSES.map((s) => [s, stored.get(s) ?? 0])) as Record<
      (typeof BATCH_STATUSES)[number],
      number
    >;
    // Written to a socket by this process, its delivery mark not yet committed: delivered, as the
    // command's own view shows it.
    if (counts.queued > 0) {
      for (const row of await batchStore.queuedCommands(db, batchId, now, this.options.maxSessions)) {
        if (this.commands.view(row).status !== 'delivered') continue;
        counts.queued--;
        counts.delivered++;
      }
    }
    const accepted = BATCH_STATUSES.reduce((sum, s) => sum + counts[s], 0);
    const { entries, hasMore } = await this.storedEntries(batchId, page.after, page.limit);
    return {
      batchId,
      tenantCohortId: batch.tenant_cohort_id,
      name: batch.name,
      issuedAt: batch.issued_at,
      total: batch.total,
      accepted,
      refused: await batchStore.refusalCount(db, batchId),
      counts,
      sessions: entries,
      nextCursor: hasMore ? entries[entries.length - 1].sessionId : null,
      hasMore,
    };
  }

  /** Up to `limit` entries of the batch after the session `after`, commands and refusals merged in session order. */
  private async storedEntries(batchId: string, after: string | null, limit: number) {
    const { db } = this.storage;
    const [commands, refusals] = await Promise.all([
      batchStore.commandsPage(db, batchId, after, limit + 1),
      batchStore.refusalsPage(db, batchId, after, limit + 1),
    ]);
    const merged: BatchEntry[] = [
      ...commands.map((row) => {
        const view = this.commands.view(row);
        return { sessionId: row.session_id, commandId: row.command_id, status: view.status };
      }),
      ...refusals.map((r) => ({ sessionId: r.session_id, error: { code: r.code, detail: r.detail } })),
    ].sort((a, b) => (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0));
    return { entries: merged.slice(0, limit), hasMore: merged.length > limit };
  }
}

/** The 202 body (CONTRACT §12), as text: it is kept and sent again as it is. */
function render(batch: BatchRow, entries: BatchEntry[]): string {
  const refused = entries.filter((e) => 'error' in e).length;
  return JSON.stringify({
    batchId: batch.batch_id,
    total: batch.total,
    accepted: entries.length - refused,
    refused,
    sessions: entries,
  });
}
