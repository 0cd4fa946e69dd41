/**
 * Group commit for small writes: items submitted while a batch is being written wait and go
 * together in the next one, so N concurrent callers cost one transaction (one fsync), not N.
 * Each caller's promise settles when the batch holding its item has been written.
 */
export class Batcher<T, R> {
  private queue: { item: T; resolve: (r: R) => void; reject: (e: unknown) => void }[] = [];
  private running = false;

  constructor(
    private readonly write: (items: T[]) => Promise<R[]>,
    private readonly maxBatch = 1000,
  ) {}

  submit(item: T): Promise<R> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain() {
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        try {
          const results = await this.write(batch.map((b) => b.item));
          batch.forEach((b, i) => {
            b.resolve(results[i]);
          });
        } catch (err) {
          for (const b of batch) b.reject(err);
        }
      }
    } finally {
      this.running = false;
    }
  }
}
