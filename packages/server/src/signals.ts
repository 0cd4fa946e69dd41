/**
 * What a command came to: the device acknowledged it, refused it, it expired unanswered, or the
 * tenant cancelled it (CONTRACT §14).
 */
export type CommandOutcome = 'acknowledged' | 'failed' | 'expired' | 'cancelled';

export interface SettledCommand {
  commandId: string;
  sessionId: string;
  tenantId: string;
  name: string;
  data: Record<string, unknown>;
  outcome: CommandOutcome;
  error: unknown;
}

/**
 * In-process signals between modules (ARCHITECTURE: modules meet through exported functions or
 * signals). They are emitted after the fact they report has been committed.
 */
export interface SignalMap {
  'command.settled': SettledCommand;
  'session.started': {
    sessionId: string;
    tenantId: string;
    playerId: string;
    tenantCohortId: string | null;
    startedAt: number;
  };
  'session.ended': {
    sessionId: string;
    tenantId: string;
    playerId: string;
    tenantCohortId: string | null;
    endedAt: number;
    reason: string;
  };
}

type Handler<T> = (payload: T) => Promise<void> | void;

export class Signals {
  private readonly handlers = new Map<keyof SignalMap, Handler<never>[]>();

  constructor(private readonly onError: (err: unknown, signal: string) => void) {}

  on<K extends keyof SignalMap>(name: K, handler: Handler<SignalMap[K]>) {
    const list = this.handlers.get(name) ?? [];
    list.push(handler as Handler<never>);
    this.handlers.set(name, list);
  }

  /** Whether any module listens to `name` (an emitter may then skip building the payload). */
  listens(name: keyof SignalMap): boolean {
    return this.handlers.has(name);
  }

  /**
   * Runs every handler and waits for all of them, so a caller can rely on their effects. A failing
   * handler is reported and does not stop the others nor fail the caller.
   */
  async emit<K extends keyof SignalMap>(name: K, payload: SignalMap[K]): Promise<void> {
    const list = (this.handlers.get(name) ?? []) as Handler<SignalMap[K]>[];
    await Promise.all(
      list.map(async (handler) => {
        try {
          await handler(payload);
        } catch (err) {
          this.onError(err, name);
        }
      }),
    );
  }
}
