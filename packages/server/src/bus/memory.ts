import { randomUUID } from 'node:crypto';
import type { BusHandler, BusMessage, RealtimeBus } from './bus.ts';

/** The bus of a single process: messages go straight to the local handler. */
export class MemoryBus implements RealtimeBus {
  readonly nodeId = randomUUID();
  private handler: BusHandler | null = null;
  private readonly owners = new Map<string, string>();

  async publish(message: BusMessage): Promise<void> {
    await this.handler?.(message);
  }

  subscribe(handler: BusHandler): void {
    this.handler = handler;
  }

  async claim(sessionId: string, connectionId: string): Promise<void> {
    this.owners.set(sessionId, connectionId);
  }

  async release(sessionId: string, connectionId: string): Promise<void> {
    if (this.owners.get(sessionId) === connectionId) this.owners.delete(sessionId);
  }

  async connected(sessionIds: string[]): Promise<Set<string>> {
    return new Set(sessionIds.filter((id) => this.owners.has(id)));
  }

  async close(): Promise<void> {
    this.handler = null;
    this.owners.clear();
  }
}

MemoryBus satisfies new () => RealtimeBus;
