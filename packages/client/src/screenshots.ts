import type { ScreenshotCommandData, ScreenshotFormat } from '@liveline/protocol';
import type { HttpClient } from './http.ts';
import { sessionPath } from './session.ts';

/** The types a screenshot may have (CONTRACT §14): the server reads the real one from the bytes. */
export type ScreenshotType = 'image/jpeg' | 'image/png';

/** One screenshot as the app's provider takes it. */
export interface Screenshot {
  bytes: Uint8Array;
  type: ScreenshotType;
}

/** What a provider is asked for: the format the tenant would like (a hint; the provider may ignore it). */
export interface ScreenshotRequest {
  format?: ScreenshotFormat;
}

/** Takes a screenshot of the app's view; the engine supplies it (`screenshotProvider` option). */
export type ScreenshotProvider = (request: ScreenshotRequest) => Promise<Screenshot>;

/** The stored `Screenshot` event the server answers an upload with. */
export interface StoredScreenshot {
  id: string;
  sessionId: string;
  eventType: 'Screenshot';
  timestamp: number;
  imageId: string;
  width: number;
  height: number;
  streamingSessionId?: string;
}

/** Options of `device.takeScreenshot()`. */
export interface TakeScreenshotOptions extends ScreenshotRequest {
  /** Ties the screenshot to this stream (else the server ties it to the live one, if any). */
  streamingSessionId?: string;
}

/** `POST /client/v1/sessions/{id}/screenshots`: one multipart part `image`, the optional stream id. */
export function uploadScreenshot(
  http: HttpClient,
  sessionId: string,
  shot: Screenshot,
  options: TakeScreenshotOptions,
  signal?: AbortSignal,
): Promise<StoredScreenshot> {
  const form = new FormData();
  const name = shot.type === 'image/png' ? 'screenshot.png' : 'screenshot.jpg';
  form.append('image', new Blob([new Uint8Array(shot.bytes)], { type: shot.type }), name);
  if (options.streamingSessionId) form.append('streamingSessionId', options.streamingSessionId);
  return http.request<StoredScreenshot>('POST', `${sessionPath(sessionId)}/screenshots`, form, signal);
}

/** A `screenshot` command's data as a provider request (unknown options are ignored). */
export function screenshotRequest(data: unknown): ScreenshotRequest {
  const format = (data as ScreenshotCommandData | null)?.format;
  return format === 'jpeg' || format === 'png' ? { format } : {};
}

/** The part of a canvas `screenshotFromCanvas` uses: a DOM canvas (`toBlob`) or an OffscreenCanvas. */
export type CanvasLike =
  | { toBlob(callback: (blob: globalThis.Blob | null) => void, type?: string, quality?: number): void }
  | { convertToBlob(options?: { type?: string; quality?: number }): Promise<globalThis.Blob> };

/**
 * A provider that takes the screenshot from a canvas (the TypeScript reference for WebXR and
 * browser apps): `canvas.toBlob` (or an OffscreenCanvas's `convertToBlob`) as JPEG by default, PNG
 * when the request or `defaults.format` asks for it. A WebGL canvas needs `preserveDrawingBuffer: true`
 * (or the call right after drawing), or it reads back blank.
 */
export function screenshotFromCanvas(
  canvas: CanvasLike,
  defaults: { format?: ScreenshotFormat; quality?: number } = {},
): ScreenshotProvider {
  return async (request) => {
    const type: ScreenshotType =
      (request.format ?? defaults.format ?? 'jpeg') === 'png' ? 'image/png' : 'image/jpeg';
    const quality = defaults.quality ?? 0.85;
    const blob =
      'convertToBlob' in canvas
        ? await canvas.convertToBlob({ type, quality })
        : await new Promise<globalThis.Blob>((resolve, reject) =>
            canvas.toBlob(
              (b) => (b ? resolve(b) : reject(new Error('The canvas gave no image.'))),
              type,
              quality,
            ),
          );
    return {
      bytes: new Uint8Array(await blob.arrayBuffer()),
      type: blob.type === 'image/png' ? 'image/png' : type,
    };
  };
}

/**
 * A provider that returns a screenshot the app already has (an engine's own capture, a file): the
 * bytes as they are, or what `source()` returns at each call.
 */
export function screenshotFromBuffer(
  source: Uint8Array | (() => Uint8Array | Promise<Uint8Array>),
  type: ScreenshotType,
): ScreenshotProvider {
  return async () => ({ bytes: typeof source === 'function' ? await source() : source, type });
}
