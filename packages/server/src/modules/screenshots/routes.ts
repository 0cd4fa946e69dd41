import type { Readable } from 'node:stream';
import multipart from '@fastify/multipart';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { type Static, Type } from 'typebox';
import { deviceOf, tenantIdOf } from '../../http/auth.ts';
import { ProblemError, problems } from '../../http/problem.ts';
import { problemResponses, Timestamp, Uuid } from '../../http/schemas.ts';
import type { DevicePrincipal } from '../auth/index.ts';
import type { ScreenshotSession, ScreenshotsService, ScreenshotUpload } from './service.ts';

/** How the routes find a session, as its caller may see it (the sessions module, adapted in `app.ts`). */
export interface ScreenshotSessions {
  /** The device's own session (its player's), or null. */
  findForDevice(principal: DevicePrincipal, sessionId: string): Promise<ScreenshotSession | null>;
  /** The tenant's session, or null. */
  findForTenant(tenantId: string, sessionId: string): Promise<ScreenshotSession | null>;
  /** Notes device contact (lastSeenAt). */
  noteContact(sessionId: string): void;
}

export interface ScreenshotsPluginOptions {
  screenshots: ScreenshotsService;
  sessions: ScreenshotSessions;
}

/** Multipart framing and the optional field, beyond the image itself. */
const MULTIPART_OVERHEAD = 64 * 1024;
const STREAM_ID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

const Pixels = Type.Integer({
  format: 'int64',
  minimum: 1,
  maximum: 2147483647,
  description: 'Pixels, from the image header.',
});

const StoredScreenshot = Type.Object(
  {
    id: Type.String({ maxLength: 128, description: 'The event id (server-generated).' }),
    sessionId: Uuid,
    eventType: Type.Literal('Screenshot'),
    timestamp: Timestamp('Server time of the upload (Unix ms).'),
    imageId: Uuid,
    width: Pixels,
    height: Pixels,
    streamingSessionId: Type.Optional(Uuid),
  },
  { description: 'The stored `Screenshot` event.' },
);

const UPLOAD_DESCRIPTION =
  'multipart/form-data with one file part `image` (a JPEG or a PNG, at most 5 MiB by default) and an ' +
  'optional text field `streamingSessionId`. Format, width and height are read from the image header ' +
  "(never from the client); the part's own Content-Type, when it names an image type, must match the " +
  'bytes. Anything else is 400 `invalid_image`; a larger image 413; a body that is not multipart 415. ' +
  'Answers 201 with the stored `Screenshot` event (`imageId`, `width`, `height`, and `streamingSessionId` ' +
  'when given or when a stream is live).';

export const screenshotsPlugin: FastifyPluginAsync<ScreenshotsPluginOptions> = async (app, options) => {
  await registerUpload(app, options);
  registerImage(app, options);
};

async function registerUpload(root: FastifyInstance, { screenshots, sessions }: ScreenshotsPluginOptions) {
  const maxBytes = screenshots.options.maxBytes;
  await root.register(async (child) => {
    await child.register(multipart, {
      throwFileSizeLimit: true,
      limits: { fileSize: maxBytes, fieldSize: 1024, files: 1, fields: 4, parts: 5, headerPairs: 32 },
    });
    child.withTypeProvider<TypeBoxTypeProvider>().post(
      '/client/v1/sessions/:sessionId/screenshots',
      {
        config: { auth: { device: true } },
        schema: {
          tags: ['device'],
          operationId: 'uploadScreenshot',
          summary: 'Upload a screenshot (multipart): the image and its Screenshot event in one step.',
          description: UPLOAD_DESCRIPTION,
          consumes: ['multipart/form-data'],
          params: Type.Object({ sessionId: Uuid }, { additionalProperties: false }),
          response: { 201: StoredScreenshot, ...problemResponses(400, 401, 403, 404, 413, 415, 429) },
        },
      },
      async (request, reply) => {
        const session = await sessions.findForDevice(deviceOf(request), request.params.sessionId);
        if (!session) throw problems.notFound('session');
        sessions.noteContact(session.sessionId);
        const upload = await readUpload(request, maxBytes);
        const event = await screenshots.upload(session, upload);
        return reply.code(201).send(event as Static<typeof StoredScreenshot>);
      },
    );
  });
}

/** The image part and the optional field, or the problem with them. */
async function readUpload(request: FastifyRequest, maxBytes: number): Promise<ScreenshotUpload> {
  if (!request.isMultipart())
    throw problems.unsupportedMediaType('Send the screenshot as multipart/form-data.');
  if (Number(request.headers['content-length'] ?? 0) > maxBytes + MULTIPART_OVERHEAD)
    throw tooLarge(maxBytes);
  let image: { bytes: Buffer; type: string } | null = null;
  let streamingSessionId: string | null = null;
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file' && part.fieldname === 'image' && image === null) {
        image = { bytes: await part.toBuffer(), type: part.mimetype ?? '' };
      } else if (part.type === 'field' && part.fieldname === 'streamingSessionId') {
        streamingSessionId = String(part.value);
      } else {
        throw invalidPart(
          part.fieldname,
          part.type === 'file' ? 'is not an allowed file part' : 'is not an allowed field',
        );
      }
    }
  } catch (err) {
    throw multipartProblem(err, maxBytes);
  }
  if (image === null) throw invalidPart('image', 'is required: a file part holding the JPEG or PNG');
  if (streamingSessionId !== null && !STREAM_ID.test(streamingSessionId))
    throw invalidPart('streamingSessionId', 'must be a UUID');
  return { bytes: image.bytes, declaredType: image.type, streamingSessionId };
}

function invalidPart(path: string, message: string) {
  return problems.validation(`The upload is invalid: ${path} ${message}.`, [{ path, message }]);
}

function tooLarge(maxBytes: number) {
  return problems.payloadTooLarge(`A screenshot may be at most ${maxBytes} bytes.`);
}

/** Errors of the multipart reader (busboy, @fastify/multipart) as problem documents. */
function multipartProblem(err: unknown, maxBytes: number): ProblemError {
  if (err instanceof ProblemError) return err;
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  if (status === 413) return tooLarge(maxBytes);
  return problems.validation('The request body is not well-formed multipart/form-data.', [
    { path: '', message: 'is not well-formed multipart/form-data' },
  ]);
}

function registerImage(root: FastifyInstance, { screenshots, sessions }: ScreenshotsPluginOptions) {
  const ImageSchema = Type.Unsafe<Buffer | Readable>({
    type: 'string',
    format: 'binary',
    maxLength: screenshots.options.maxBytes,
  });
  root.withTypeProvider<TypeBoxTypeProvider>().get(
    '/sessions/:SessionId/screenshots/:imageId',
    {
      config: { auth: { tenant: 'sessions:read' } },
      schema: {
        tags: ['sessions'],
        operationId: 'getScreenshot',
        summary: "A session's screenshot: the image as uploaded (image/jpeg or image/png).",
        params: Type.Object({ SessionId: Uuid, imageId: Uuid }, { additionalProperties: false }),
        response: {
          200: {
            description: 'The image, byte for byte as the device uploaded it.',
            content: { 'image/jpeg': { schema: ImageSchema }, 'image/png': { schema: ImageSchema } },
          },
          ...problemResponses(400, 401, 403, 404, 429),
        },
      },
    },
    async (request, reply) => {
      const { SessionId, imageId } = request.params;
      const session = await sessions.findForTenant(tenantIdOf(request), SessionId);
      const image = session && (await screenshots.image(session.sessionId, imageId));
      if (!image) throw problems.notFound('screenshot');
      // An image never changes under its id: caches may keep it (privately: it is the tenant's).
      reply
        .type(image.contentType)
        .header('Content-Length', image.size)
        .header('Cache-Control', 'private, max-age=86400, immutable')
        .header('ETag', `"${imageId}"`)
        .header('Content-Security-Policy', "default-src 'none'");
      return reply.send(image.stream);
    },
  );
}
