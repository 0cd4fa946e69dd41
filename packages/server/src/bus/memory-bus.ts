import { randomUUID } from 'node:crypto';
import { type Bus, type BusHandler, type BusMessage, runHandlers } from './bus.ts';

/** The bus of a single process: messages go straight to the local handlers. */
export class MemoryBus implements Bus {
  readonly nodeId = randomUUID();
  private handlers: BusHandler[] = [];

  publish(message: BusMessage): Promise<void> {
    return runHandlers(this.handlers, message);
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
