import type { AppContext } from '../../context.ts';
import { problems } from '../../http/problem.ts';
import type { SessionRow } from '../sessions/service.ts';
import type { EventSource } from './service.ts';
import { validateEventBatch } from './validation.ts';

/**
 * Validates and stores one batch for a session — the same rules over HTTP and over the device's
 * socket. Throws a problem (nothing stored) for a bad batch. A device's `SessionEnd` also
 * ends the session (it is the session's end event; no second one is emitted).
 */
export async function ingestBatch(
  ctx: Pick<AppContext, 'sessions' | 'events' | 'config' | 'clock'>,
  row: SessionRow,
  body: unknown,
  source: Exclude<EventSource, 'server'>,
) {
  const checked = validateEventBatch(body, {
    sessionId: row.session_id,
    now: ctx.clock.now(),
    maxEvents: ctx.config.maxEventsPerBatch,
  });
  if (!checked.ok) {
    const first = checked.errors[0];
    const more = checked.errors.length > 1 ? ` (and ${checked.errors.length - 1} more)` : '';
    const detail = `The event batch was rejected, nothing was stored: ${first?.path ?? 'events'} ${first?.message ?? 'is invalid'}${more}.`;
    throw problems.eventBatchRejected(checked.code, detail, checked.errors);
  }
  const result = await ctx.events.ingest(await ctx.sessions.eventTarget(row), checked.events, source);
  const end = source === 'device' ? checked.events.find((e) => e.eventType === 'SessionEnd') : undefined;
  if (end) {
    const reason = typeof end.fields.reason === 'string' ? end.fields.reason : 'device';
    await ctx.sessions.end(row, reason, { emit: false });
  }
  return result;
}
