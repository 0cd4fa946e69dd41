import { type Context, context, type Link, type Tracer, trace } from '@opentelemetry/api';
import { activeTracer, inSpan } from './tracing.ts';

export interface BatcherOptions<T> {
  /** The span of each batch while tracing (tracing.ts), e.g. `events group commit`. */
  name?: string;
  /** Most items one batch takes (default 1000). */
  maxBatch?: number;
  /** With `weight`: a batch stops growing past this total weight (its first item always goes). */
  maxWeight?: number;
  weight?: (item: T) => number;
  /** Batches written at once (default 1; PostgreSQL commits in parallel, SQLite has one writer). */
  concurrency?: number;
  /**
   * When a batch fails, write each of its items alone, so one bad item (or a deadlock victim) does
   * not fail its neighbours. Off by default: the whole batch is rejected.
   */
  retryAlone?: boolean;
  /**
   * An idle writer starts its batch at the end of the event loop's turn (`setImmediate`), not at the
   * first item: every item the turn submits (the requests one read of the sockets brought) shares
   * it. Off by default: the first item goes at once.
   */
  gather?: boolean;
  /**
   * Items no caller needs written soon (`lingers(item)`: acks, whose device waits for nothing) wait up
   * to `ms` for an item that does, and go in its batch: a queue of lingering items alone starts a
   * batch only once its oldest has waited `ms`. Under load they ride along with the next batch
   * instead of taking the writer for a batch of their own, which the next urgent item would queue
   * behind. Off by default.
   */
  linger?: { ms: number; lingers: (item: T) => boolean };
}

interface Waiting<T, R> {
  item: T;
  /** The submitter's trace context, kept only while tracing. */
  context?: Context;
  /** With `linger`: when a lingering item was submitted (undefined: it does not linger). */
  since?: number;
  resolve: (r: R) => void;
  reject: (e: unknown) => void;
}

/** The time over which `utilization` is weighted (exponentially). */
const UTILIZATION_WINDOW_MS = 100;
/** A writer idle this long is not busy, whatever its last batches were. */
const UTILIZATION_IDLE_MS = 100;

/** Links a batch's span keeps to the spans of the requests that shared it. */
const MAX_LINKS = 128;

/**
 * Group commit, the one queue every small durable write goes through (event batches, command
 * deliveries, acks): items submitted while a batch is being written wait and go together in the
 * next one, so N concurrent callers cost one transaction (one fsync), not N. Each caller's promise
 * settles when the batch holding its item has been written.
 */
export class Batcher<T, R> {
  private queue: Waiting<T, R>[] = [];
  private inFlight = 0;
  /** Share of time every slot held a batch, exponentially weighted over time (`utilization`). */
  private busyShare = 0;
  private busySince = 0;
  private idleSince = performance.now();
  private readonly options: Required<Omit<BatcherOptions<T>, 'weight' | 'linger'>> &
    Pick<BatcherOptions<T>, 'weight' | 'linger'>;
  private readonly spanName: string;
  /** A `gather` pump is scheduled for the end of this turn. */
  private gathering = false;
  /** Queued items that do not linger (`linger`). */
  private urgent = 0;
  /** The pump due when the oldest lingering item has waited long enough. */
  private lingerTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly write: (items: T[]) => Promise<R[]>,
    options: BatcherOptions<T> = {},
  ) {
    this.spanName = options.name ?? 'group commit';
    this.options = {
      name: this.spanName,
      maxBatch: 1000,
      maxWeight: Number.POSITIVE_INFINITY,
      concurrency: 1,
      retryAlone: false,
      gather: false,
      ...options,
    };
  }

  submit(item: T): Promise<R> {
    return new Promise((resolve, reject) => {
      const tracing = activeTracer() !== null;
      const waiting: Waiting<T, R> = tracing
        ? { item, resolve, reject, context: context.active() }
        : { item, resolve, reject };
      const { linger } = this.options;
      if (linger?.lingers(item)) waiting.since = performance.now();
      else this.urgent++;
      this.queue.push(waiting);
      if (!this.options.gather) this.pump();
      else if (!this.gathering && this.inFlight < this.options.concurrency) {
        this.gathering = true;
        setImmediate(() => {
          this.gathering = false;
          this.pump();
        });
      }
    });
  }

  private pump() {
    const { concurrency } = this.options;
    while (this.inFlight < concurrency && this.queue.length > 0) {
      if (this.lingering()) return;
      const batch = this.take();
      // Busy (for `utilization`) while every slot is taken.
      if (++this.inFlight === concurrency) this.busySince = performance.now();
      void this.flush(batch).finally(() => {
        if (this.inFlight-- === concurrency) this.wentIdle();
        this.pump();
      });
    }
  }

  /** Only lingering items wait, none for long enough yet: the pump is due when the oldest has. */
  private lingering(): boolean {
    const { linger } = this.options;
    if (!linger || this.urgent > 0) return false;
    const waited = performance.now() - (this.queue[0].since ?? 0);
    if (waited >= linger.ms) return false;
    this.lingerTimer ??= setTimeout(() => {
      this.lingerTimer = null;
      this.pump();
    }, linger.ms - waited);
    return true;
  }

  private wentIdle() {
    const now = performance.now();
    this.busyShare = this.blend(now);
    this.idleSince = now;
  }

  /** `busyShare` with the period since the last batch ended (idle, then busy until `now`) counted in. */
  private blend(now: number): number {
    const busy = now - this.busySince;
    const idle = this.busySince - this.idleSince;
    // Weighted by time: the last ~UTILIZATION_WINDOW_MS count most, however many batches they held.
    const weight = 1 - Math.exp(-(busy + idle) / UTILIZATION_WINDOW_MS);
    return this.busyShare + weight * (busy / Math.max(busy + idle, 1e-3) - this.busyShare);
  }

  /**
   * How busy the writer has been lately, 0 to 1: the share of time every one of its `concurrency`
   * slots held a batch in flight (one writer: the share of time a batch was in flight), weighted
   * towards the last ~100 ms; 0 after a pause of `UTILIZATION_IDLE_MS`. Near 1 while batches follow
   * each other back to back in every slot (callers queue for the writer), low under a load it keeps
   * up with — however long each batch takes: with several slots, a batch in flight at all times is
   * not a queue while the other slots are free (PostgreSQL on a slow disk, where each commit of a
   * paced load takes most of the time between requests).
   */
  utilization(): number {
    const now = performance.now();
    if (this.inFlight >= this.options.concurrency) return this.blend(now);
    return now - this.idleSince > UTILIZATION_IDLE_MS ? 0 : this.busyShare;
  }

  private take(): Waiting<T, R>[] {
    const { maxBatch, maxWeight, weight } = this.options;
    const taken = weight
      ? this.queue.splice(0, this.weighed(maxBatch, maxWeight, weight))
      : this.queue.splice(0, maxBatch);
    for (const waiting of taken) if (waiting.since === undefined) this.urgent--;
    return taken;
  }

  /** How many of the first items stay within `maxWeight` (the first always goes). */
  private weighed(maxBatch: number, maxWeight: number, weight: (item: T) => number): number {
    let total = 0;
    let n = 0;
    while (n < this.queue.length && n < maxBatch) {
      const w = weight(this.queue[n].item);
      if (n > 0 && total + w > maxWeight) break;
      total += w;
      n++;
    }
    return n;
  }

  /**
   * One span per batch while tracing: a child of the first traced submitter's span (its request
   * shows the commit it waited for), linked to the other traced submitters' spans, which shared it.
   */
  private traced(tracer: Tracer, batch: Waiting<T, R>[]): Promise<R[]> {
    let parent: Context | undefined;
    const links: Link[] = [];
    for (const waiting of batch) {
      const span = waiting.context && trace.getSpan(waiting.context);
      if (!span?.isRecording()) continue;
      if (!parent) parent = waiting.context;
      else if (links.length < MAX_LINKS) links.push({ context: span.spanContext() });
    }
    const write = () => this.write(batch.map((b) => b.item));
    // No traced submitter (a job's write, requests the sampler left out): no span.
    if (!parent) return write();
    return inSpan(
      tracer,
      this.spanName,
      { attributes: { 'liveline.batch.size': batch.length }, links, parent },
      write,
    );
  }

  private async flush(batch: Waiting<T, R>[]) {
    try {
      const tracer = activeTracer();
      const results = tracer ? await this.traced(tracer, batch) : await this.write(batch.map((b) => b.item));
      batch.forEach((b, i) => {
        b.resolve(results[i]);
      });
    } catch (err) {
      if (!this.options.retryAlone || batch.length === 1) {
        for (const b of batch) b.reject(err);
        return;
      }
      for (const b of batch) {
        try {
          b.resolve((await this.write([b.item]))[0]);
        } catch (itemErr) {
          b.reject(itemErr);
        }
      }
    }
  }
}
