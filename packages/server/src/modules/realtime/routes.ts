import type { FastifyPluginAsync } from 'fastify';
import { Type } from 'typebox';
import type { RawData } from 'ws';
import { deviceOf } from '../../http/auth.ts';
import { Uuid } from '../../http/schemas.ts';
import type { SessionsService } from '../sessions/index.ts';
import type { InboundLimits, RealtimeHub } from './hub.ts';
import { CLOSE } from './protocol.ts';

export interface RealtimePluginOptions {
  hub: RealtimeHub;
  sessions: Pick<SessionsService, 'findForTenant'>;
  /** The device's request budget and the socket's backlog (default: none). */
  limits?: InboundLimits;
}

/** The device's WebSocket channel: GET /client/v1/sessions/{sessionId}/realtime. */
export const realtimePlugin: FastifyPluginAsync<RealtimePluginOptions> = async (
  app,
  { hub, sessions, limits },
) => {
  app.get(
    '/client/v1/sessions/:sessionId/realtime',
    {
      websocket: true,
      config: { auth: { device: true, queryToken: true } },
      schema: {
        tags: ['device'],
        operationId: 'openRealtimeChannel',
        summary:
          'The realtime channel (WebSocket). Token in the Authorization header or `?access_token=`. ' +
          'Close codes: 4001 replaced by a newer connection, 4003 another player’s session, 4004 no such ' +
          'session, 4009 session ended, 1008 too many unprocessed messages, 1009 message too big, 1012 server ' +
          'restarting. Device frames count against the same request budget as its HTTP requests.',
        params: Type.Object({ sessionId: Uuid }, { additionalProperties: false }),
      },
    },
    async (socket, request) => {
      // Frames can arrive while the session is looked up: keep them for the hub.
      const early: RawData[] = [];
      const hold = (data: RawData) => {
        if (early.length < (limits?.maxPending ?? Number.POSITIVE_INFINITY)) early.push(data);
        else socket.close(CLOSE.policyViolation, 'too many unprocessed messages');
      };
      socket.on('message', hold);
      const principal = deviceOf(request);
      const { sessionId } = request.params as { sessionId: string };
      const row = await sessions.findForTenant(principal.tenantId, sessionId);
      socket.off('message', hold);
      // Gone meanwhile (the device left, or flooded): nothing to attach.
      if (socket.readyState !== socket.OPEN) return;
      if (!row) socket.close(CLOSE.notFound, 'no such session');
      else if (row.player_id !== principal.playerId)
        socket.close(CLOSE.forbidden, 'this token is for another player');
      else if (row.status !== 'live') socket.close(CLOSE.sessionEnded, 'the session has ended');
      else await hub.attach(socket, row, principal, early, limits);
    },
  );
};
