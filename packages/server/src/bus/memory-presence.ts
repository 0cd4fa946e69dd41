import type { Presence } from './presence.ts';

/** Presence within one process: a map from session to the connection holding its socket. */
export class MemoryPresence implements Presence {
  private readonly owners = new Map<string, string>();

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
    this.owners.clear();
  }
}

MemoryPresence satisfies new () => Presence;
