import type { Kysely } from 'kysely';
import { uuidv7 } from 'uuidv7';
import { Batcher } from '../../batcher.ts';
import type { RealtimeBus } from '../../bus/bus.ts';
import type { Clock } from '../../clock.ts';
import type { PageRequest } from '../../http/pagination.ts';
import { problems } from '../../http/problem.ts';
import type { Signals } from '../../signals.ts';
import type { Database, Storage } from '../../storage/index.ts';
import type { SessionRow } from '../sessions/service.ts';
import type { CommandRow } from './store.ts';
import * as store from './store.ts';

export type CommandStatus = 'queued' | 'delivered' | 'acknowledged' | 'failed' | 'expired';

export interface IssueCommand {
  name: string;
  data: unknown;
  ttlSeconds: number;
  idempotencyKey: string | null;
  /** Digest of the request, so a reused Idempotency-Key with another request is refused. */
  requestHash: string;
  /**
   * Runs in the command's transaction before the row is written (the streams module moves its
   * state machine here, so both happen or neither) and may add fields to the command's data.
   */
  prepare?: (trx: Kysely<Database>, commandId: string) => Promise<Record<string, unknown> | undefined>;
}

interface Ack {
  sessionId: string;
  commandId: string;
  status: 'acknowledged' | 'failed';
  error: string | null;
}

export type AckResult = 'settled' | 'unknown' | 'expired' | 'already_settled';

/** The command log: issuing, delivery bookkeeping, acknowledgements and expiry. */
export class CommandsService {
  /** Deliveries and acks of concurrent commands share one transaction each (see Batcher). */
  private readonly deliveries: Batcher<string, undefined>;
  private readonly acks: Batcher<Ack, CommandRow | undefined>;

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly bus: RealtimeBus,
    private readonly signals: Signals,
  ) {
    this.deliveries = new Batcher(async (ids) => {
      await store.markDelivered(storage.db, ids, clock.now());
      return ids.map(() => undefined);
    });
    this.acks = new Batcher((acks) =>
      storage.db.transaction().execute(async (trx) => {
        const rows: (CommandRow | undefined)[] = [];
        const now = clock.now();
        for (const a of acks) {
          rows.push(await store.settleCommand(trx, a.sessionId, a.commandId, a.status, a.error, now));
        }
        return rows;
      }),
    );
  }

  /** Stores a command and has it written to the device's socket if it is connected anywhere. */
  async issue(session: SessionRow, input: IssueCommand) {
    const { db } = this.storage;
    const replay = await this.replayed(session, input);
    if (replay) return replay;
    if (session.status !== 'live') throw problems.sessionEnded();
    const commandId = uuidv7();
    const now = this.clock.now();
    try {
      await db.transaction().execute(async (trx) => {
        const extra = input.prepare ? await input.prepare(trx, commandId) : undefined;
        const data = extra ? { ...(input.data as Record<string, unknown>), ...extra } : input.data;
        await store.insertCommand(trx, {
          command_id: commandId,
          session_id: session.session_id,
          tenant_id: session.tenant_id,
          name: input.name,
          data: JSON.stringify(data ?? null),
          status: 'queued',
          issued_at: now,
          expires_at: now + input.ttlSeconds * 1000,
          delivered_at: null,
          settled_at: null,
          error: null,
          idempotency_key: input.idempotencyKey,
          request_hash: input.requestHash,
        });
      });
    } catch (err) {
      // A concurrent retry with the same key may have won the race: answer with its command.
      const raced = await this.replayed(session, input);
      if (raced) return raced;
      throw err;
    }
    await this.bus.publish({ type: 'flush', sessionId: session.session_id });
    const row = await store.findCommand(db, session.session_id, commandId);
    // The answer tells how far delivery got (CONTRACT §3: delivered or queued), even when a quick
    // device has already acknowledged it; GET shows the later states.
    return { ...this.view(row!), status: row!.delivered_at === null ? 'queued' : 'delivered' } as const;
  }

  private async replayed(session: SessionRow, input: IssueCommand) {
    if (!input.idempotencyKey) return null;
    const existing = await store.findByIdempotencyKey(
      this.storage.db,
      session.tenant_id,
      session.session_id,
      input.idempotencyKey,
    );
    if (!existing) return null;
    if (existing.request_hash !== input.requestHash) {
      throw problems.idempotencyKeyReused();
    }
    return this.view(existing);
  }

  async find(sessionId: string, commandId: string) {
    const row = await store.findCommand(this.storage.db, sessionId, commandId);
    return row ? this.view(row) : null;
  }

  async list(sessionId: string, page: PageRequest) {
    const { rows, totalCount } = await store.listCommands(this.storage.db, sessionId, page);
    return { commands: rows.map((r) => this.view(r)), totalCount };
  }

  /** What the device should receive now, oldest first (delivered-but-unanswered ones again: at-least-once). */
  pending(sessionId: string) {
    return store.pendingCommands(this.storage.db, sessionId, this.clock.now());
  }

  async markDelivered(commandIds: string[]) {
    await Promise.all(commandIds.map((id) => this.deliveries.submit(id)));
  }

  /** Records the device's answer to a command and tells the modules that wait on it. */
  async acknowledge(sessionId: string, commandId: string, ok: boolean, error: unknown): Promise<AckResult> {
    const row = await this.acks.submit({
      sessionId,
      commandId,
      status: ok ? 'acknowledged' : 'failed',
      error: ok ? null : JSON.stringify(error ?? 'failed'),
    });
    if (!row) {
      const existing = await store.findCommand(this.storage.db, sessionId, commandId);
      if (!existing) return 'unknown';
      return existing.status === 'queued' || existing.status === 'delivered' || existing.status === 'expired'
        ? 'expired'
        : 'already_settled';
    }
    await this.signals.emit('command.settled', this.settled(row, ok ? 'acknowledged' : 'failed'));
    return 'settled';
  }

  /** Expires open commands past their time and reports each; returns how many. */
  async sweepExpired(): Promise<number> {
    const expired = await store.expireCommands(this.storage.db, this.clock.now());
    for (const row of expired) await this.signals.emit('command.settled', this.settled(row, 'expired'));
    return expired.length;
  }

  private settled(row: CommandRow, outcome: 'acknowledged' | 'failed' | 'expired') {
    return {
      commandId: row.command_id,
      sessionId: row.session_id,
      tenantId: row.tenant_id,
      name: row.name,
      data: (JSON.parse(row.data) ?? {}) as Record<string, unknown>,
      outcome,
      error: row.error === null ? null : (JSON.parse(row.error) as unknown),
    };
  }

  /** The command as the API shows it. An open command past its expiry is shown expired at once. */
  view(row: CommandRow) {
    const open = row.status === 'queued' || row.status === 'delivered';
    const status = (open && row.expires_at <= this.clock.now() ? 'expired' : row.status) as CommandStatus;
    return {
      commandId: row.command_id,
      sessionId: row.session_id,
      name: row.name,
      data: JSON.parse(row.data) as unknown,
      status,
      issuedAt: row.issued_at,
      expiresAt: row.expires_at,
      deliveredAt: row.delivered_at,
      settledAt: row.settled_at ?? (status === 'expired' ? row.expires_at : null),
      error: row.error === null ? null : (JSON.parse(row.error) as unknown),
    };
  }
}

export type CommandView = ReturnType<CommandsService['view']>;
