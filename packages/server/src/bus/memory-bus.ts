import { randomUUID } from 'node:crypto';
import { type Bus, type BusHandler, type BusMessage, runHandlers } from './bus.ts';

/** The bus of a single process: messages go straight to the local handlers. */
export class MemoryBus implements Bus {
  readonly nodeId = randomUUID();
  private handlers: BusHandler[] = [];

  publish(message: BusMessage): Promise<void> {
    return runHandlers(this.handlers, message);
  }

  /** The only node is this one. */
  send(nodeId: string, message: BusMessage): Promise<void> {
    return nodeId === this.nodeId ? runHandlers(this.handlers, message) : Promise.resolve();
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
