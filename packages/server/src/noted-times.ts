/**
 * Times noted in memory to be written later in a few statements (device contact, delivery times):
 * `note` is a map write on the hot path; `flush` hands everything noted so far to a writer, grouped by
 * time (rounded down to `granularityMs`), so a flush costs one statement per distinct time, not per id.
 * What a flush is writing stays readable (`get`) until its write is done: a reader never sees a time
 * neither in memory nor in the store.
 */
export class NotedTimes {
  private noted = new Map<string, number>();
  /** Taken by the flush in progress, not yet written. */
  private flushing = new Map<string, number>();

  constructor(private readonly granularityMs = 1) {}

  /** How many ids wait for the next flush. */
  get size() {
    return this.noted.size;
  }

  note(id: string, at: number) {
    this.noted.set(id, at);
  }

  get(id: string): number | undefined {
    return this.noted.get(id) ?? this.flushing.get(id);
  }

  forget(id: string) {
    this.noted.delete(id);
    this.flushing.delete(id);
  }

  /**
   * Hands everything noted so far to `write`, by time; returns how many ids it wrote. When `write`
   * fails, what it was given is noted again (a newer note for the same id wins) and the error thrown.
   * One flush at a time.
   */
  async flush(write: (byTime: Map<number, string[]>) => Promise<void>): Promise<number> {
    const taken = this.noted;
    this.noted = new Map();
    this.flushing = taken;
    const byTime = new Map<number, string[]>();
    for (const [id, at] of taken) {
      const time = at - (at % this.granularityMs);
      const ids = byTime.get(time);
      if (ids) ids.push(id);
      else byTime.set(time, [id]);
    }
    try {
      await write(byTime);
    } catch (err) {
      for (const [id, at] of this.flushing) if (!this.noted.has(id)) this.noted.set(id, at);
      throw err;
    } finally {
      this.flushing = new Map();
    }
    return taken.size;
  }
}
