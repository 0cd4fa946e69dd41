/**
 * Times noted in memory to be written later in a few statements (device contact, delivery times):
 * `note` is a map write on the hot path; `take` hands over everything noted so far, grouped by time
 * (rounded down to `granularityMs`), so a flush costs one statement per distinct time, not per id.
 */
export class NotedTimes {
  private noted = new Map<string, number>();

  constructor(private readonly granularityMs = 1) {}

  get size() {
    return this.noted.size;
  }

  note(id: string, at: number) {
    this.noted.set(id, at);
  }

  get(id: string): number | undefined {
    return this.noted.get(id);
  }

  forget(id: string) {
    this.noted.delete(id);
  }

  /** Everything noted so far, by time; afterwards nothing is noted. */
  take(): Map<number, string[]> {
    const taken = this.noted;
    this.noted = new Map();
    const byTime = new Map<number, string[]>();
    for (const [id, at] of taken) {
      const time = at - (at % this.granularityMs);
      const ids = byTime.get(time);
      if (ids) ids.push(id);
      else byTime.set(time, [id]);
    }
    return byTime;
  }

  /** Notes again what a failed flush took (a newer note for the same id wins). */
  restore(byTime: Map<number, string[]>) {
    for (const [at, ids] of byTime) for (const id of ids) if (!this.noted.has(id)) this.noted.set(id, at);
  }
}
