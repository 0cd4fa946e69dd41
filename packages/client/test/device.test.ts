import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type DeviceErrorEvent,
  LivelineDevice,
  type LivelineDeviceOptions,
  LivelineError,
  SDK_VERSION,
} from '../src/index.ts';
import { eventIdsOf, FakeLiveline } from './fake-liveline.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Timers may fire a millisecond or so early; lower bounds on delays allow for that. */
const SLACK_MS = 5;

let fake: FakeLiveline;
const devices: LivelineDevice[] = [];

beforeEach(async () => {
  fake = await FakeLiveline.start();
});

afterEach(async () => {
  await Promise.all(devices.splice(0).map((device) => device.close()));
  await fake.stop();
});

/** A device against the fake server; no interval flushes unless a test asks, tiny deterministic backoff. */
function device(options: Partial<LivelineDeviceOptions> = {}): LivelineDevice {
  const created = new LivelineDevice({
    baseUrl: fake.baseUrl,
    token: fake.token,
    flushIntervalMs: 60_000,
    random: () => 1,
    retry: { initialDelayMs: 5, maxDelayMs: 20 },
    ...options,
  });
  devices.push(created);
  return created;
}

async function waitFor(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

function custom(label: string) {
  return { eventType: 'Custom', custom01: label } as const;
}

function labelsOf(events: readonly object[]): unknown[] {
  return events.map((event) => (event as { custom01?: unknown }).custom01);
}

describe('sessions', () => {
  it('starts a session with the right body and bearer token', async () => {
    const d = device();
    const info = await d.startSession({
      tenantCohortId: 'cohort-a',
      device: { model: 'Quest 3', os: 'Android 14' },
    });

    expect(info.sessionId).toMatch(UUID);
    expect(info.heartbeatIntervalMs).toBe(15_000);
    expect(info.realtimeUrl).toContain(`/client/v1/sessions/${info.sessionId}/realtime`);
    expect(d.session).toEqual(info);

    const [request] = fake.requests;
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/client/v1/sessions');
    expect(request.headers.authorization).toBe(`Bearer ${fake.token}`);
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.body).toEqual({
      tenantCohortId: 'cohort-a',
      device: { model: 'Quest 3', os: 'Android 14', sdkVersion: SDK_VERSION },
    });
  });

  it('reports a refused session start as a LivelineError with the problem fields', async () => {
    const d = device({ token: 'wrong' });
    const error = await d.startSession().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LivelineError);
    expect(error).toMatchObject({ status: 401, code: 'unauthorized', retryable: false });
    expect(d.session).toBeNull();
  });

  it('endSession flushes buffered events first, then ends the session', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    for (const label of ['a', 'b', 'c']) d.track(custom(label));

    const session = await d.endSession();

    expect(fake.requests.map((request) => request.path)).toEqual([
      '/client/v1/sessions',
      `/client/v1/sessions/${sessionId}/events`,
      `/client/v1/sessions/${sessionId}/end`,
    ]);
    expect(fake.storedIds(sessionId)).toHaveLength(3);
    expect(session).toMatchObject({ sessionId, status: 'ended' });
    expect(d.session).toBeNull();
    expect(d.stats()).toMatchObject({ sent: 3, buffered: 0 });
  });
});

describe('batching', () => {
  it('sends a batch as soon as batchSize events are queued, and the rest on flush()', async () => {
    const d = device({ batchSize: 3 });
    const { sessionId } = await d.startSession();
    const tracked = ['1', '2', '3', '4', '5', '6', '7'].map((label) => d.track(custom(label)));

    await waitFor(() => d.stats().sent === 6);
    expect(fake.batches()).toHaveLength(2);
    expect(d.stats().buffered).toBe(1);

    await d.flush();
    expect(fake.batches()).toEqual([
      tracked.slice(0, 3).map((event) => event.id),
      tracked.slice(3, 6).map((event) => event.id),
      [tracked[6].id],
    ]);
    expect(fake.eventRequests()[0].path).toBe(`/client/v1/sessions/${sessionId}/events`);
    expect(fake.eventRequests()[0].headers.authorization).toBe(`Bearer ${fake.token}`);
  });

  it('sends a partial batch after flushIntervalMs', async () => {
    const d = device({ flushIntervalMs: 20 });
    const { sessionId } = await d.startSession();
    d.track(custom('a'));
    d.track(custom('b'));
    expect(fake.eventRequests()).toHaveLength(0);

    await waitFor(() => d.stats().sent === 2);
    expect(fake.storedIds(sessionId)).toHaveLength(2);
    expect(fake.batches()).toHaveLength(1);
    expect(d.stats()).toEqual({ sent: 2, duplicates: 0, dropped: 0, rejected: 0, buffered: 0, retries: 0 });
  });

  it('fills id and timestamp when absent and keeps them when given', async () => {
    const now = 1_750_000_000_000;
    const d = device({ clock: { now: () => now } });
    const { sessionId } = await d.startSession();

    const filled = d.track({ eventType: 'Health', fps: 72, batteryLevel: 80 });
    const second = d.track(custom('x'));
    const given = d.track({
      eventType: 'Design',
      eventId: 'level:boss',
      id: 'my-id',
      timestamp: 1_700_000_000_000,
    });
    await d.flush();

    expect(filled.id).toMatch(UUID);
    expect(second.id).toMatch(UUID);
    expect(second.id).not.toBe(filled.id);
    expect(filled.timestamp).toBe(now);
    expect(given).toMatchObject({ id: 'my-id', timestamp: 1_700_000_000_000 });
    const [request] = fake.eventRequests();
    expect(request.body).toEqual({
      events: [
        { eventType: 'Health', fps: 72, batteryLevel: 80, id: filled.id, timestamp: now },
        { eventType: 'Custom', custom01: 'x', id: second.id, timestamp: now },
        { eventType: 'Design', eventId: 'level:boss', id: 'my-id', timestamp: 1_700_000_000_000 },
      ],
    });
    expect(fake.storedIds(sessionId)).toEqual([filled.id, second.id, 'my-id']);
  });
});

describe('retries', () => {
  it('resends the same batch after 503s, with exponential backoff', async () => {
    const d = device({ retry: { initialDelayMs: 20, maxDelayMs: 1000 } });
    const { sessionId } = await d.startSession();
    fake.failNext({ status: 503, code: 'unavailable' }, { status: 503, code: 'unavailable' });
    const ids = ['a', 'b', 'c'].map((label) => d.track(custom(label)).id);

    await d.flush();

    const attempts = fake.eventRequests();
    expect(attempts).toHaveLength(3);
    for (const attempt of attempts) expect(eventIdsOf(attempt.body)).toEqual(ids);
    // random() = 1 makes full jitter pick the ceiling: 20 ms, then 40 ms.
    expect(attempts[1].at - attempts[0].at).toBeGreaterThanOrEqual(20 - SLACK_MS);
    expect(attempts[2].at - attempts[1].at).toBeGreaterThanOrEqual(40 - SLACK_MS);
    expect(fake.storedIds(sessionId)).toEqual(ids);
    expect(d.stats()).toMatchObject({ sent: 3, retries: 2, rejected: 0, buffered: 0 });
  });

  it('honours Retry-After in seconds on a 429', async () => {
    // random() = 0 would make the backoff 0 ms: any wait comes from Retry-After.
    const d = device({ random: () => 0 });
    await d.startSession();
    fake.failNext({ status: 429, code: 'rate_limited', headers: { 'retry-after': '1' } });
    d.track(custom('a'));

    await d.flush();

    const [first, second] = fake.eventRequests();
    expect(second.at - first.at).toBeGreaterThanOrEqual(1000 - SLACK_MS);
    expect(eventIdsOf(second.body)).toEqual(eventIdsOf(first.body));
  });

  it('honours Retry-After as an HTTP date, measured with the injected clock', async () => {
    const retryAt = 1_750_000_000_000; // a whole second, as HTTP dates have no milliseconds
    const d = device({ random: () => 0, clock: { now: () => retryAt - 150 } });
    await d.startSession();
    fake.failNext({
      status: 429,
      code: 'rate_limited',
      headers: { 'retry-after': new Date(retryAt).toUTCString() },
    });
    d.track(custom('a'));

    await d.flush();

    const [first, second] = fake.eventRequests();
    expect(second.at - first.at).toBeGreaterThanOrEqual(150 - SLACK_MS);
  });

  it('buffers through a server outage and flushes in order once it is back on the same port', async () => {
    const d = device({ batchSize: 2 });
    const { sessionId } = await d.startSession();
    await fake.stop();

    const ids = ['1', '2', '3', '4', '5'].map((label) => d.track(custom(label)).id);
    const flushed = d.flush();
    await waitFor(() => d.stats().retries >= 3);
    expect(d.stats().buffered).toBe(5);

    await fake.restart();
    await flushed;

    expect(fake.storedIds(sessionId)).toEqual(ids);
    expect(fake.batches()).toEqual([ids.slice(0, 2), ids.slice(2, 4), ids.slice(4)]);
    expect(d.stats()).toMatchObject({ sent: 5, buffered: 0, dropped: 0, rejected: 0 });
  });

  it('resends after a lost response; the server dedupes by id', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    fake.failNext('drop', 'storeThenDrop');
    const ids = ['a', 'b', 'c'].map((label) => d.track(custom(label)).id);

    await d.flush();

    expect(fake.batches()).toEqual([ids, ids, ids]);
    expect(fake.storedIds(sessionId)).toEqual(ids);
    expect(d.stats()).toMatchObject({ sent: 3, duplicates: 3, retries: 2 });
  });
});

describe('refusals', () => {
  it('drops only a batch refused with 400, and reports it', async () => {
    const d = device({ batchSize: 2 });
    const { sessionId } = await d.startSession();
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    fake.failNext('pass', {
      status: 400,
      body: {
        type: 'about:blank',
        title: 'Bad Request',
        status: 400,
        detail: 'events[1].custom01 is too long',
        code: 'validation_failed',
        errors: [{ path: 'events[1].custom01', message: 'must be at most 1024 characters' }],
      },
    });
    const ids = ['1', '2', '3', '4', '5', '6'].map((label) => d.track(custom(label)).id);

    await d.flush();

    expect(fake.storedIds(sessionId)).toEqual([ids[0], ids[1], ids[4], ids[5]]);
    expect(d.stats()).toMatchObject({ sent: 4, rejected: 2, retries: 0, buffered: 0 });
    expect(errors).toHaveLength(1);
    expect(errors[0].error).toMatchObject({
      status: 400,
      code: 'validation_failed',
      detail: 'events[1].custom01 is too long',
      errors: [{ path: 'events[1].custom01', message: 'must be at most 1024 characters' }],
      retryable: false,
    });
    expect(errors[0].rejectedEvents.map((event) => event.id)).toEqual([ids[2], ids[3]]);
  });

  it('splits a batch refused with 413 instead of dropping it', async () => {
    const d = device({ batchSize: 4 });
    const { sessionId } = await d.startSession();
    fake.failNext({ status: 413, code: 'payload_too_large' });
    const ids = ['1', '2', '3', '4'].map((label) => d.track(custom(label)).id);

    await d.flush();

    expect(fake.batches()).toEqual([ids, ids.slice(0, 2), ids.slice(2)]);
    expect(fake.storedIds(sessionId)).toEqual(ids);
    expect(d.stats()).toMatchObject({ sent: 4, rejected: 0 });
  });

  it('pauses on 401 keeping the events, and resumes after setToken()', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    fake.token = 'rotated-token';
    const ids = ['a', 'b'].map((label) => d.track(custom(label)).id);

    await expect(d.flush()).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
    expect(errors).toHaveLength(1);
    expect(errors[0].rejectedEvents).toEqual([]);
    expect(d.pendingEvents().map((event) => event.id)).toEqual(ids);
    expect(d.stats()).toMatchObject({ rejected: 0, buffered: 2 });

    d.setToken('rotated-token');
    await d.flush();
    expect(fake.storedIds(sessionId)).toEqual(ids);
  });
});

describe('buffer', () => {
  it('drops the oldest events beyond maxBufferedEvents', async () => {
    const d = device({ batchSize: 5, maxBufferedEvents: 5 });
    const labels = ['1', '2', '3', '4', '5', '6', '7', '8'];
    for (const label of labels) d.track(custom(label)); // no session yet: nothing leaves the buffer

    expect(d.stats()).toMatchObject({ dropped: 3, buffered: 5 });
    expect(labelsOf(d.pendingEvents())).toEqual(labels.slice(3));

    const { sessionId } = await d.startSession();
    await d.flush();
    expect(labelsOf(fake.sessions.get(sessionId)?.events ?? [])).toEqual(labels.slice(3));
  });

  it('never drops the batch in flight when the buffer overflows', async () => {
    const d = device({ batchSize: 2, maxBufferedEvents: 3 });
    const { sessionId } = await d.startSession();
    await fake.stop();
    const ids = ['1', '2'].map((label) => d.track(custom(label)).id); // a full batch: in flight at once
    await waitFor(() => d.stats().retries >= 1);

    ids.push(...['3', '4', '5'].map((label) => d.track(custom(label)).id));
    expect(d.stats()).toMatchObject({ dropped: 2, buffered: 3 });

    await fake.restart();
    await d.flush();
    expect(fake.storedIds(sessionId)).toEqual([ids[0], ids[1], ids[4]]);
    expect(d.stats()).toMatchObject({ sent: 3, dropped: 2, buffered: 0 });
  });

  it('close() stops sending, rejects pending flushes and keeps the events', async () => {
    const d = device();
    await d.startSession();
    await fake.stop();
    const tracked = ['a', 'b', 'c'].map((label) => d.track(custom(label)));
    const flushed = d.flush();
    await waitFor(() => d.stats().retries >= 1);

    await d.close();

    await expect(flushed).rejects.toMatchObject({ code: 'closed' });
    expect(d.pendingEvents()).toEqual(tracked);
    expect(d.stats()).toMatchObject({ buffered: 3, sent: 0 });
    expect(() => d.track(custom('late'))).toThrow(LivelineError);
    await expect(d.flush()).rejects.toMatchObject({ code: 'closed' });
  });

  it('flush() without a session rejects with no_session', async () => {
    const d = device();
    d.track(custom('a'));
    await expect(d.flush()).rejects.toMatchObject({ code: 'no_session' });
    expect(d.stats().buffered).toBe(1);
  });
});
