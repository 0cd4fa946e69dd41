import type { StampedEvent } from './events.ts';
import type { FieldError, LivelineError } from './http.ts';

/** One event the SDK dropped because the server refused it, with what the server said about it. */
export interface EventRejection {
  event: StampedEvent;
  /**
   * The server's complaints about this event, with paths relative to the event: `cpuUsage` for the
   * server's `events[3].cpuUsage`, `''` for `events[3]` itself. Empty when the server blamed the batch
   * as a whole rather than this event.
   */
  errors: FieldError[];
}

/** `events[3]`, `events[3].timestamp`, `events[3].tags[0]`: a path into one event of the batch. */
const EVENT_PATH = /^events\[(\d+)\](?=$|[.[])/;

/**
 * Which events of a refused batch to drop, by index in the batch, each with its complaints (paths
 * relative to the event), in batch order.
 *
 * The server validates a batch all-or-nothing and names every bad event in `errors`. So when a 400's
 * `errors` all point into events of the batch, only those events are dropped and the rest can be resent.
 * Otherwise (a path such as `events` or `''`, no `errors` at all, an index beyond the batch, another
 * 4xx) the whole batch is dropped. The result is never empty: each resend of the rest is smaller.
 */
export function refusedEvents(error: LivelineError, batchLength: number): Map<number, FieldError[]> {
  const byEvent = new Map<number, FieldError[]>();
  let eventSpecific = error.status === 400 && error.errors.length > 0;
  for (const { path, message } of error.errors) {
    const match = EVENT_PATH.exec(path);
    const index = match ? Number(match[1]) : Number.NaN;
    if (!match || !(index < batchLength)) {
      eventSpecific = false;
      continue;
    }
    const rest = path.slice(match[0].length);
    const relative = { path: rest.startsWith('.') ? rest.slice(1) : rest, message };
    const errors = byEvent.get(index);
    if (errors) errors.push(relative);
    else byEvent.set(index, [relative]);
  }
  const refused = new Map<number, FieldError[]>();
  for (let index = 0; index < batchLength; index++) {
    const errors = byEvent.get(index);
    if (errors || !eventSpecific) refused.set(index, errors ?? []);
  }
  return refused;
}
