/** A tiny typed event emitter: `Events` maps each event name to its payload type. */
export class Emitter<Events extends object> {
  private readonly listeners = new Map<keyof Events, Set<(payload: never) => void>>();

  /** Adds a listener; the returned function removes it. */
  on<K extends keyof Events>(name: K, listener: (payload: Events[K]) => void): () => void {
    let set = this.listeners.get(name);
    if (!set) {
      set = new Set();
      this.listeners.set(name, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
    };
  }

  listenerCount(name: keyof Events): number {
    return this.listeners.get(name)?.size ?? 0;
  }

  /**
   * Calls every listener of `name`. A throwing listener must not break the SDK's own work, so its
   * error is rethrown on a later tick, where it surfaces as an uncaught exception like any app bug.
   */
  emit<K extends keyof Events>(name: K, payload: Events[K]): void {
    for (const listener of this.listeners.get(name) ?? []) {
      try {
        (listener as (payload: Events[K]) => void)(payload);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
