import { randomUUID } from 'node:crypto';
import type { Bus, BusHandler, BusMessage } from './bus.ts';

/** The bus of a single process: messages go straight to the local handlers. */
export class MemoryBus implements Bus {
  readonly nodeId = randomUUID();
  private handlers: BusHandler[] = [];

  async publish(message: BusMessage): Promise<void> {
    for (const handler of this.handlers) await handler(message);
  }

  subscribe(handler: BusHandler): void {
    this.handlers.push(handler);
  }

  /** One process misses nothing. */
  onResync(): void {}

  async close(): Promise<void> {
    this.handlers = [];
  }
}

MemoryBus satisfies new () => Bus;
