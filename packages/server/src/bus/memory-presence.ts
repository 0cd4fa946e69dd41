import type { Holder, Presence } from './presence.ts';

/** Presence within one process: a map from session to the connection holding its socket. */
export class MemoryPresence implements Presence {
  private readonly owners = new Map<string, string>();
  private readonly holder: Holder;

  constructor(readonly nodeId: string) {
    this.holder = { node: nodeId, addressable: true };
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

  async holders(sessionIds: string[]): Promise<Map<string, Holder>> {
    const found = new Map<string, Holder>();
    for (const id of sessionIds) if (this.owners.has(id)) found.set(id, this.holder);
    return found;
  }

  async close(): Promise<void> {
    this.owners.clear();
  }
}

MemoryPresence satisfies new (
  nodeId: string,
) => Presence;
