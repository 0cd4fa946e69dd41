import type { Clock } from '../../clock.ts';
import { type ProblemError, problems } from '../../http/problem.ts';
import type { Storage } from '../../storage/index.ts';
import * as store from './store.ts';

export interface QueueOptions {
  /** Most unsettled (queued or delivered) commands per session; 0: no quota. */
  limit: number;
  /**
   * Other processes accept and settle commands too (`REDIS_URL`): their commands are heard on the bus
   * (`addedElsewhere`, announced every ~100 ms), their settlements are not, so a queue that looks half
   * full is read again from the store before each command.
   */
  shared: boolean;
}

/** The unsettled commands of one session that this process knows of: command → expiresAt. */
interface Queue {
  open: Map<string, number>;
  loadedAt: number;
}

/** Sessions remembered at most; the oldest are forgotten (and read again when they next get a command). */
const MAX_SESSIONS = 50_000;
/** Sessions whose queues one statement reads. */
const LOAD_CHUNK = 500;

/**
 * The quota of unsettled commands per session (`LIVELINE_QUOTA_PENDING_COMMANDS`, 429
 * `command_queue_full`), kept cheap for the hot command path: a session's unsettled commands are read
 * from the store once, then kept in memory — added when the command log commits a command, removed
 * when it commits an ack, and when a command is cancelled or expires. The check runs in the log's
 * one writer, group by group, so within a process a concurrent burst cannot pass the quota; no
 * COUNT(*) per command.
 *
 * Across processes (`shared`), each process also hears of the others' commands on the bus (each
 * process announces the commands it stored every ~100 ms, `CommandDelivery.accept`), not of their
 * settlements: a queue that looks half full is read again from the store before each command, and one
 * that looks full before it is refused. Commands accepted through several processes in the same
 * ~100 ms can still pass the quota by those in flight (each process's check is atomic, not the
 * deployment's).
 */
export class CommandQueues {
  private readonly queues = new Map<string, Queue>();
  /** Sessions being read from the store → what was settled or heard of meanwhile (applied after). */
  private readonly loading = new Map<string, { settled: Set<string>; added: Map<string, number> }>();

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly options: QueueOptions,
  ) {}

  get limit() {
    return this.options.limit;
  }

  /**
   * For each new command of a group, in order: null when it fits its session's queue (counting the
   * group's earlier ones), else the refusal. Nothing is remembered until `added` (after the commit).
   */
  async admit(rows: readonly { session_id: string }[]): Promise<(ProblemError | null)[]> {
    if (this.options.limit <= 0 || rows.length === 0) return rows.map(() => null);
    const started = this.clock.now();
    const sessions = new Set(rows.map((r) => r.session_id));
    await this.load([...sessions].filter((id) => this.stale(id)));
    let verdicts = this.decide(rows);
    if (this.options.shared) {
      // Full by what this process knows: others may have settled some meanwhile. Look again.
      const full = new Set(rows.filter((_, i) => verdicts[i]).map((r) => r.session_id));
      const old = [...full].filter((id) => (this.queues.get(id)?.loadedAt ?? 0) < started);
      if (old.length > 0) {
        await this.load(old);
        verdicts = this.decide(rows);
      }
    }
    return verdicts;
  }

  /** A command was committed (after `admit` let it in). */
  added(row: { session_id: string; command_id: string; expires_at: number }) {
    this.queues.get(row.session_id)?.open.set(row.command_id, row.expires_at);
  }

  /** A command was settled (acknowledged, failed, cancelled or expired): it leaves its queue. */
  settled(sessionId: string, commandId: string) {
    this.queues.get(sessionId)?.open.delete(commandId);
    this.loading.get(sessionId)?.settled.add(commandId);
  }

  /** Another process accepted a command (heard on the bus): counted until the queue is read again from the store. */
  addedElsewhere(sessionId: string, commandId: string, expiresAt: number) {
    this.queues.get(sessionId)?.open.set(commandId, expiresAt);
    this.loading.get(sessionId)?.added.set(commandId, expiresAt);
  }

  /**
   * Whether to read the session's queue from the store: when it is not known here; with several
   * processes also when it is half full (a command heard of late, or settled elsewhere, matters now).
   */
  private stale(sessionId: string) {
    const queue = this.queues.get(sessionId);
    if (!queue) return true;
    return this.options.shared && queue.open.size * 2 >= this.options.limit;
  }

  private async load(sessionIds: string[]) {
    if (sessionIds.length === 0) return;
    for (const id of sessionIds) this.loading.set(id, { settled: new Set(), added: new Map() });
    try {
      // Many sessions at once (a cohort-wide command's group): one read per LOAD_CHUNK sessions.
      const chunks: string[][] = [];
      for (let i = 0; i < sessionIds.length; i += LOAD_CHUNK)
        chunks.push(sessionIds.slice(i, i + LOAD_CHUNK));
      await Promise.all(
        chunks.map(async (ids) => {
          const now = this.clock.now();
          const rows = await store.openCommandsOf(this.storage.db, ids, now);
          const found = new Map<string, Map<string, number>>(ids.map((id) => [id, new Map()]));
          for (const r of rows) found.get(r.session_id)?.set(r.command_id, r.expires_at);
          for (const [id, open] of found) {
            const meanwhile = this.loading.get(id);
            for (const [commandId, expiresAt] of meanwhile?.added ?? []) open.set(commandId, expiresAt);
            for (const commandId of meanwhile?.settled ?? []) open.delete(commandId);
            this.queues.delete(id);
            this.queues.set(id, { open, loadedAt: now });
          }
        }),
      );
    } finally {
      for (const id of sessionIds) this.loading.delete(id);
    }
    if (this.queues.size > MAX_SESSIONS) {
      // Forget the sessions read longest ago (Map order); they are read again when needed.
      let drop = this.queues.size - Math.floor(MAX_SESSIONS * 0.9);
      for (const id of this.queues.keys()) {
        if (drop-- <= 0) break;
        if (!sessionIds.includes(id)) this.queues.delete(id);
      }
    }
  }

  private decide(rows: readonly { session_id: string }[]): (ProblemError | null)[] {
    const limit = this.options.limit;
    const now = this.clock.now();
    const admitted = new Map<string, number>();
    return rows.map(({ session_id }) => {
      const queue = this.queues.get(session_id);
      if (!queue) return null;
      const inGroup = admitted.get(session_id) ?? 0;
      if (queue.open.size + inGroup >= limit) {
        // Commands past their expiry are no longer pending, swept or not.
        for (const [id, expiresAt] of queue.open) if (expiresAt <= now) queue.open.delete(id);
        if (queue.open.size + inGroup >= limit)
          return problems.commandQueueFull(limit, retryAfter(queue, now));
      }
      admitted.set(session_id, inGroup + 1);
      return null;
    });
  }
}

/** Seconds until the session's oldest unsettled command expires at the latest (then one place frees up). */
function retryAfter(queue: Queue, now: number): number {
  let soonest = Number.POSITIVE_INFINITY;
  for (const expiresAt of queue.open.values()) soonest = Math.min(soonest, expiresAt);
  return Number.isFinite(soonest) ? Math.max(1, Math.ceil((soonest - now) / 1000)) : 1;
}
