import { AspectRatioSchema, ResolutionSchema } from '@liveline/protocol';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { deviceOf } from '../../http/auth.ts';
import { noBodyIsEmptyObject } from '../../http/empty-body.ts';
import { problems } from '../../http/problem.ts';
import { EmptyObject, problemResponses, Uuid } from '../../http/schemas.ts';
import type { SessionRow, SessionsService } from '../sessions/index.ts';
import type { StreamsService } from './service.ts';

const DeviceSessionParams = Type.Object({ sessionId: Uuid }, { additionalProperties: false });

export const StreamStartBody = Type.Object(
  { resolution: ResolutionSchema, aspectratio: AspectRatioSchema },
  { additionalProperties: false },
);
const StreamAnswer = Type.Object({ streamingSessionId: Uuid });
const RecordingAnswer = Type.Object({ recordingId: Uuid });

/**
 * Streams and recordings started or stopped inside the app (CONTRACT §2, spec rule 3), . The sweep that
 * stops streams whose device stayed away longer than the grace is a job (`jobs.ts`).
 */
export interface StreamsPluginOptions {
  streams: StreamsService;
  sessions: Pick<SessionsService, 'findForDevice' | 'touch'>;
}

/** The options of one app-initiated route: device auth, no body is `{}`, its answer. */
function routeOptions(
  path: string,
  operationId: string,
  summary: string,
  body: typeof StreamStartBody | typeof EmptyObject,
  answer: typeof StreamAnswer | typeof RecordingAnswer,
) {
  return {
    config: { auth: { device: true } } as const,
    // A stop or a record start needs no body: none at all is the same as `{}`.
    ...(body === EmptyObject ? { preValidation: noBodyIsEmptyObject } : {}),
    schema: {
      tags: ['device'],
      operationId,
      summary,
      description: `\`POST /client/v1/sessions/{sessionId}/${path}\`. 409 \`session_ended\` for an ended session.`,
      params: DeviceSessionParams,
      body,
      response: { 200: answer, ...problemResponses(400, 401, 403, 404, 409, 415, 429) },
    },
  };
}

export const streamsPlugin: FastifyPluginAsync<StreamsPluginOptions> = async (app, { streams, sessions }) => {
  /** The device's own live session; each call counts as device contact. */
  async function ownSession(request: FastifyRequest): Promise<SessionRow> {
    const { sessionId } = request.params as { sessionId: string };
    const row = await sessions.findForDevice(deviceOf(request), sessionId);
    if (!row) throw problems.notFound('session');
    await sessions.touch(row.session_id);
    return row;
  }
  const route = (
    path: string,
    operationId: string,
    summary: string,
    body: typeof StreamStartBody | typeof EmptyObject,
    answer: typeof StreamAnswer | typeof RecordingAnswer,
    act: (session: SessionRow, body: { resolution: number; aspectratio: number }) => Promise<unknown>,
  ) =>
    app.post(
      `/client/v1/sessions/:sessionId/${path}`,
      routeOptions(path, operationId, summary, body, answer),
      async (request) =>
        act(await ownSession(request), request.body as { resolution: number; aspectratio: number }),
    );

  route(
    'stream/start',
    'startStream',
    'The app started a stream: StreamStarted. 409 `already_streaming` unless the stream is idle.',
    StreamStartBody,
    StreamAnswer,
    (session, { resolution, aspectratio }) => streams.appStreamStart(session, { resolution, aspectratio }),
  );
  route(
    'stream/stop',
    'stopStream',
    'The app stopped its stream: StreamStopped (`reason: "app"`); a recording stops with it. 409 `not_streaming`.',
    EmptyObject,
    StreamAnswer,
    (session) => streams.appStreamStop(session),
  );
  route(
    'record/start',
    'startRecording',
    'The app started recording its stream: RecordingStarted. 409 `not_streaming` / `already_recording`.',
    EmptyObject,
    RecordingAnswer,
    (session) => streams.appRecordStart(session),
  );
  route(
    'record/stop',
    'stopRecording',
    'The app stopped recording: RecordingStopped. 409 `not_recording`.',
    EmptyObject,
    RecordingAnswer,
    (session) => streams.appRecordStop(session),
  );
};
