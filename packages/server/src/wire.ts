import type { PresenceChange } from './bus/index.ts';
import type { Services } from './compose.ts';
import type { AuthChange } from './modules/auth/index.ts';
import { CLOSE } from './modules/realtime/index.ts';
import { eventSession, type SessionRow } from './modules/sessions/index.ts';
import { STREAM_COMMAND_NAMES } from './modules/streams/index.ts';
import type { StoredEvent } from './modules/webhooks/index.ts';

/**
 * Every hook, signal and decorator that joins the modules, in one place. It reads as the two flows.
 *
 * A command: commands stores it (the streams state machine moves in the same transaction through an
 * issue hook) → delivery carries it over the bus to the process holding the socket → the hub writes
 * it → the device's ack settles it, and in that same transaction streams move (a settle hook), writing
 * their events and the events' outbox rows; expiry and cancel settle the same way (`command.settled`
 * follows the commit).
 *
 * An event batch: events validates and group-commits it, stamped with the live stream; in the same
 * transaction sessions record the device's contact and webhooks write outbox rows.
 */
export function wire(s: Services) {
  const {
    events,
    sessions,
    liveSessions,
    streams,
    commands,
    delivery,
    hub,
    bus,
    presence,
    signals,
    webhooks,
    auth,
    tail,
    clock,
    retention,
    screenshots,
  } = s;

  // Retention deletes an event's screenshot image (blob and row) before the event itself.
  retention.onDeleting(async (sessionId, eventIds) => {
    await screenshots.forgetEvents(sessionId, eventIds);
  });

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
    opened: async (line) => {
      void bus.publish({
        type: 'presence',
        presence: presenceOf(line.session, 'device.connected', clock.now()),
      });
      await delivery.opened(line.session.session_id, line.connectionId);
    },
    closed: (line) => {
      delivery.closed(line.session.session_id, line.connectionId);
      // A socket replaced by the device's newer one is no departure.
      if (!line.replaced)
        void bus.publish({
          type: 'presence',
          presence: presenceOf(line.session, 'device.disconnected', clock.now()),
        });
    },
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
  commands.onSettle(STREAM_COMMAND_NAMES, (trx, command) => streams.onCommandSettled(trx, command));

  // --- an event batch -------------------------------------------------------------------------------
  events.resolveStreamWith((sessionId, db) => streams.currentStreamId(sessionId, db));
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
      stored.push({
        tenantId: session.tenantId,
        tenantCohortId: session.tenantCohortId,
        eventType: row.event_type,
        receivedAt: row.received_at,
        body: row.body,
      });
    }
    await webhooks.outbox.recordStoredEvents(trx, stored);
  });
  // A device's SessionEnd event is the session's end, in the transaction that stores it (no second
  // SessionEnd is emitted); the end is announced once committed.
  // Deliveries wait while a flood of events saturates the store; the events are stored first.
  webhooks.giveWayTo(() => events.ingestionLoad());
  events.onSessionEndEvent(async (trx, session, reason) => {
    const ended = await sessions.endIn(trx, session.sessionId, reason, { emit: false });
    return ended ? () => sessions.announceEnd(ended) : undefined;
  });

  // --- several processes ---------------------------------------------------------------------------
  // After a cut in the bus, this process may have missed commands, endpoint changes and revocations.
  bus.onResync(() => {
    liveSessions.clear();
    void delivery.resync();
    webhooks.changedElsewhere(null);
    void auth.refresh().then(
      () => {
        hub.closeRefused((principal) => auth.refusal(principal));
        tail.closeRefused((principal) => auth.refusal(principal) !== null);
      },
      () => {}, // the auth.refresh job tries again
    );
  });
  webhooks.onEndpointsChanged(
    (tenantId) => void bus.publish({ type: 'endpoints.changed', tenantId, origin: bus.nodeId }),
  );
  bus.subscribe((message) => {
    if (message.type === 'endpoints.changed' && message.origin !== bus.nodeId)
      webhooks.changedElsewhere(message.tenantId);
    // A session ended (or was erased: 4003) here or on another process: its remembered row goes.
    if (message.type === 'close' && (message.code === CLOSE.sessionEnded || message.code === CLOSE.forbidden))
      liveSessions.forget(message.sessionId);
    // An erased session's live tails end (a reader coming back gets 404).
    if (message.type === 'close' && message.code === CLOSE.forbidden) tail.closeSession(message.sessionId);
  });
  // Revocations and key rotations (CONTRACT §15) reach every process; sockets of revoked tokens close (4003).
  auth.onChange((change) => bus.publish({ type: 'auth.changed', origin: bus.nodeId, change }));
  const authChanged = async (origin: string, change: AuthChange) => {
    if (origin !== bus.nodeId) await auth.changedElsewhere(change);
    if (change.kind !== 'keys') {
      hub.closeRefused((principal) => auth.refusal(principal));
      tail.closeRefused((principal) => auth.refusal(principal) !== null);
    }
  };
  // Nothing (no promise) for every other message: the bus awaits only what a handler returns.
  bus.subscribe((message) =>
    message.type === 'auth.changed' ? authChanged(message.origin, message.change) : undefined,
  );

  // --- what a session is, and its end -----------------------------------------------------------------
  sessions.addDecorator((ids) => streams.liveStates(ids));
  sessions.addDecorator(async (ids) => {
    const connected = await presence.connected(ids);
    return new Map([...connected].map((id) => [id, { connected: true }]));
  });
  // In the transaction that ends a session its stream stops first (with its events), then its own
  // SessionEnd is written; the signal follows the commit.
  sessions.onEnding((trx, ended) => streams.stopOnSessionEnd(trx, ended));
  // A deleted session (retention) takes its commands and stream state along, in its transaction.
  sessions.onRemoving((trx, sessionId) => commands.forgetSession(trx, sessionId));
  sessions.onRemoving((trx, sessionId) => streams.forgetSession(trx, sessionId));
  // An ended session's socket is closed wherever it is (the device can still post late events).
  signals.on('session.ended', ({ sessionId }) =>
    bus.publish({ type: 'close', sessionId, code: CLOSE.sessionEnded, reason: 'the session has ended' }),
  );

  // --- the live tail (CONTRACT §11) ----------------------------------------------------------------
  // Events reach its readers from the store (every process reads what any process stored); presence
  // comes over the bus, so a reader on any process hears of a device on any other.
  signals.on('session.started', (s) =>
    bus.publish({
      type: 'presence',
      presence: {
        kind: 'session.started',
        tenantId: s.tenantId,
        sessionId: s.sessionId,
        playerId: s.playerId,
        tenantCohortId: s.tenantCohortId,
        at: s.startedAt,
      },
    }),
  );
  signals.on('session.ended', (s) =>
    bus.publish({
      type: 'presence',
      presence: {
        kind: 'session.ended',
        tenantId: s.tenantId,
        sessionId: s.sessionId,
        playerId: s.playerId,
        tenantCohortId: s.tenantCohortId,
        at: s.endedAt,
      },
    }),
  );
  bus.subscribe((message) => {
    if (message.type === 'presence') tail.presence(message.presence);
  });
  events.onIngested(() => tail.wake());

  // --- alert rules (CONTRACT §13) ------------------------------------------------------------------
  // Evaluated in the ingestion transaction (after the webhook outbox hook); a session's end resolves
  // its open incidents in the end's transaction; rule changes reach the other processes' caches.
  const { alerts } = s;
  events.onStored((trx, group) => alerts.onStored(trx, group));
  sessions.onEnding((trx, ended) =>
    alerts.onSessionEnded(trx, {
      sessionId: ended.session_id,
      tenantId: ended.tenant_id,
      tenantCohortId: ended.tenant_cohort_id,
      playerId: ended.player_id,
      endedAt: ended.ended_at ?? clock.now(),
    }),
  );
  sessions.onRemoving((trx, sessionId) => alerts.forgetSession(trx, sessionId));
  alerts.onRulesChanged(
    (tenantId) => void bus.publish({ type: 'alerts.changed', tenantId, origin: bus.nodeId }),
  );
  bus.subscribe((message) => {
    if (message.type === 'alerts.changed' && message.origin !== bus.nodeId)
      alerts.changedElsewhere(message.tenantId);
  });
  bus.onResync(() => alerts.changedElsewhere(null));

  wireErasure(s);
}

/**
 * Players' erasure (CONTRACT §16): each module deletes what it keeps of the erased sessions, in
 * batches, when the erasure job asks (images before their events: the blob, then the row); claims
 * lose the player; unsent webhook deliveries naming the sessions or the player go. The erased
 * sessions close everywhere with 4003 and every process forgets them (the bus `close`).
 */
export function wireErasure(s: Services) {
  const { players, screenshots, events, commands, streams, alerts, webhooks, rewards, bus } = s;
  players.addEraser('screenshots', (scope, limit) => screenshots.eraseSessions(scope.sessionIds, limit));
  players.addEraser('events', (scope, limit) => events.eraseSessions(scope.sessionIds, limit));
  players.addEraser('commands', (scope, limit) => commands.eraseSessions(scope.sessionIds, limit));
  players.addEraser('streams', (scope, limit) => streams.eraseSessions(scope, limit));
  players.addEraser('alerts', (scope, limit) => alerts.eraseSessions(scope.sessionIds, limit));
  players.addEraser('webhooks', (scope, limit) =>
    webhooks.eraseUnsent(
      scope.tenantId,
      [...scope.sessionIds, `"playerId":${JSON.stringify(scope.playerId)}`],
      limit,
    ),
  );
  players.addEraser('claims', (scope, limit) =>
    rewards.claims.erasePlayer(scope.tenantId, scope.playerId, limit),
  );
  players.onErased(async ({ sessionIds }) => {
    for (const sessionId of sessionIds)
      await bus.publish({
        type: 'close',
        sessionId,
        code: CLOSE.forbidden,
        reason: "the player's data was erased",
      });
  });
}

function presenceOf(session: SessionRow, kind: PresenceChange['kind'], at: number): PresenceChange {
  return {
    kind,
    tenantId: session.tenant_id,
    sessionId: session.session_id,
    playerId: session.player_id,
    tenantCohortId: session.tenant_cohort_id,
    at,
  };
}
