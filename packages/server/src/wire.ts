import type { Services } from './compose.ts';
import { CLOSE } from './modules/realtime/index.ts';
import { eventSession } from './modules/sessions/index.ts';
import type { StoredEvent } from './modules/webhooks/index.ts';

/**
 * Every hook, signal and decorator that joins the modules, in one place. It reads as the two flows.
 *
 * A command: commands stores it (the streams state machine moves in the same transaction through an
 * issue hook) → delivery carries it over the bus to the process holding the socket → the hub writes
 * it → the device's ack settles it (`command.settled`) → streams move and emit their events.
 *
 * An event batch: events validates and group-commits it, stamped with the live stream; in the same
 * transaction sessions record the device's contact and webhooks write outbox rows.
 */
export function wire(s: Services) {
  const { events, sessions, streams, commands, delivery, hub, bus, presence, signals, webhooks } = s;

  // --- a command ------------------------------------------------------------------------------------
  commands.onIssue('stream.start', async (trx, session, { commandId, data }) => {
    const { resolution, aspectratio } = data as { resolution: number; aspectratio: number };
    return streams.requestStreamStart(trx, session, { resolution, aspectratio }, commandId);
  });
  commands.onIssue('stream.stop', async (trx, session, { commandId }) => {
    await streams.requestStreamStop(trx, session, commandId);
    return undefined;
  });
  commands.onIssue('record.start', (trx, session, { commandId }) =>
    streams.requestRecordStart(trx, session, commandId),
  );
  commands.onIssue('record.stop', async (trx, session, { commandId }) => {
    await streams.requestRecordStop(trx, session, commandId);
    return undefined;
  });
  delivery.useTransport(hub);
  hub.handle({
    opened: (line) => delivery.opened(line.session.session_id, line.connectionId),
    closed: (line) => delivery.closed(line.session.session_id, line.connectionId),
    ack: async (_line, { commandId, ok, error }) => {
      const result = await commands.acknowledge(_line.session.session_id, commandId, ok, error);
      if (result === 'unknown')
        return {
          type: 'error',
          code: 'unknown_command',
          message: 'No such command for this session.',
          commandId,
        };
      if (result === 'expired')
        return {
          type: 'error',
          code: 'command_expired',
          message: 'The command expired before this ack arrived.',
          commandId,
        };
      return null;
    },
    events: async (line, message) => {
      // The session as it is now (it may have ended since the socket opened).
      const row = (await sessions.findForDevice(line.principal, line.session.session_id)) ?? line.session;
      const requestId = message.requestId ? { requestId: message.requestId } : {};
      try {
        const result = await events.ingestBatch(eventSession(row), { events: message.events }, 'device');
        return { type: 'events.ack', ...result, ...requestId };
      } catch (err) {
        const problem = err as { status?: number; code?: string; message: string; errors?: unknown };
        if (typeof problem.status !== 'number' || problem.status >= 500) throw err;
        return {
          type: 'error',
          code: problem.code ?? 'invalid',
          message: problem.message,
          errors: problem.errors,
          ...requestId,
        };
      }
    },
    contact: (sessionId) => sessions.noteContact(sessionId),
  });
  signals.on('command.settled', (command) => streams.onCommandSettled(command));

  // --- an event batch -------------------------------------------------------------------------------
  events.resolveStreamWith((sessionId) => streams.currentStreamId(sessionId));
  events.onStored((trx, group) => sessions.touchAll(trx, group.contacts));
  events.onStored(async (trx, group) => {
    const tenants = new Set([...group.sessions.values()].map((session) => session.tenantId));
    // Tenants without an endpoint for session events cost a cache lookup, not a query.
    const taking = await webhooks.outbox.tenantsTakingEvents(trx, tenants);
    if (taking.size === 0) return;
    const stored: StoredEvent[] = [];
    for (const row of group.inserted) {
      const session = group.sessions.get(row.session_id)!;
      if (!taking.has(session.tenantId)) continue;
      stored.push({ ...session, eventType: row.event_type, receivedAt: row.received_at, body: row.body });
    }
    await webhooks.outbox.recordStoredEvents(trx, stored);
  });
  // A device's SessionEnd event is the session's end (no second SessionEnd is emitted).
  events.onSessionEndEvent(async (session, reason) => {
    const row = await sessions.findForTenant(session.tenantId, session.sessionId);
    if (row) await sessions.end(row, reason, { emit: false });
  });

  // --- several processes ---------------------------------------------------------------------------
  // After a cut in the bus, this process may have missed commands and endpoint changes.
  bus.onResync(() => {
    void delivery.resync();
    webhooks.changedElsewhere(null);
  });
  webhooks.onEndpointsChanged(
    (tenantId) => void bus.publish({ type: 'endpoints.changed', tenantId, origin: bus.nodeId }),
  );
  bus.subscribe((message) => {
    if (message.type === 'endpoints.changed' && message.origin !== bus.nodeId)
      webhooks.changedElsewhere(message.tenantId);
  });

  // --- what a session is, and its end -----------------------------------------------------------------
  sessions.addDecorator((ids) => streams.liveStates(ids));
  sessions.addDecorator(async (ids) => {
    const connected = await presence.connected(ids);
    return new Map([...connected].map((id) => [id, { connected: true }]));
  });
  // Other modules wind down first (a live stream stops), then the session's own SessionEnd.
  signals.on('session.ended', (ended) => streams.stopOnSessionEnd(ended));
  // An ended session's socket is closed wherever it is (the device can still post late events).
  signals.on('session.ended', ({ sessionId }) =>
    bus.publish({ type: 'close', sessionId, code: CLOSE.sessionEnded, reason: 'the session has ended' }),
  );
}
