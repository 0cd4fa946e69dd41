import { describe, expect, it } from 'vitest';
import {
  AspectRatio,
  backoffDelay,
  CameraControls,
  CameraView,
  HttpClient,
  isCameraControlName,
  LivelineError,
  LookType,
  parseRetryAfter,
  Resolution,
} from '../src/index.ts';

describe('backoffDelay', () => {
  const options = { initialDelayMs: 500, maxDelayMs: 30_000 };

  it('doubles the ceiling per attempt up to maxDelayMs', () => {
    const ceilings = [0, 1, 2, 3, 6, 7, 20].map((attempt) => backoffDelay(attempt, options, () => 1));
    expect(ceilings).toEqual([500, 1000, 2000, 4000, 30_000, 30_000, 30_000]);
  });

  it('picks a uniformly jittered delay below the ceiling', () => {
    expect(backoffDelay(2, options, () => 0)).toBe(0);
    expect(backoffDelay(2, options, () => 0.25)).toBe(500);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2025-06-01T12:00:00Z');

  it.each([
    ['120', 120_000],
    [' 0 ', 0],
    ['Sun, 01 Jun 2025 12:00:03 GMT', 3000],
    ['Sun, 01 Jun 2025 11:00:00 GMT', 0],
    ['soon', undefined],
    [null, undefined],
  ])('%s → %s ms', (header, expected) => {
    expect(parseRetryAfter(header, now)).toBe(expected);
  });
});

describe('HttpClient', () => {
  function clientAnswering(response: Response): HttpClient {
    return new HttpClient({ baseUrl: 'http://liveline.test/api/', token: 't', fetch: async () => response });
  }

  it('turns a response that is not a problem document into a stable code', async () => {
    const client = clientAnswering(
      new Response('<html>bad gateway</html>', { status: 502, statusText: 'Bad Gateway' }),
    );
    const error = await client.request('GET', '/x').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LivelineError);
    expect(error).toMatchObject({ status: 502, code: 'http_502', detail: 'Bad Gateway', retryable: true });
  });

  it('classifies statuses as retryable or permanent', () => {
    const retryable = (status: number) => new LivelineError({ status, code: 'x', detail: 'x' }).retryable;
    expect([408, 429, 500, 503].map(retryable)).toEqual([true, true, true, true]);
    expect([400, 401, 403, 404, 409, 413].map(retryable)).toEqual([false, false, false, false, false, false]);
  });

  it('keeps a path prefix of baseUrl and reports network failures as retryable', async () => {
    const urls: string[] = [];
    const client = new HttpClient({
      baseUrl: 'http://liveline.test/api/',
      token: 't',
      fetch: async (input) => {
        urls.push(String(input));
        throw new TypeError('fetch failed');
      },
    });
    const error = await client.request('POST', '/client/v1/sessions', {}).catch((caught: unknown) => caught);
    expect(urls).toEqual(['http://liveline.test/api/client/v1/sessions']);
    expect(error).toMatchObject({ status: 0, code: 'network_error', retryable: true });
  });
});

describe('enumerations', () => {
  it('match the wire values of the contract', () => {
    expect(Object.values(Resolution)).toEqual([0, 1, 2, 3, 4]);
    expect(AspectRatio).toEqual({ R16x9: 0, R9x16: 1, R1x1: 2, R4x3: 3, R21x9: 4 });
    expect(CameraView).toEqual({ FirstPerson: 0, ThirdPerson: 1, ObjectAttached: 2 });
    expect(LookType).toEqual({ Direction: 0, Player: 1, LookPosition: 2 });
    expect(CameraControls.heightOffset).toEqual({ kind: 'float', min: -100, max: 100 });
    expect(CameraControls.cameraView.kind).toBe('int');
    expect(isCameraControlName('fieldOfView')).toBe(true);
    expect(isCameraControlName('zoom')).toBe(false);
  });
});
