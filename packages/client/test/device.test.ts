import { describe, expect, it } from 'vitest';
import {
  type ClientEvent,
  type DeviceErrorEvent,
  type LivelineDeviceOptions,
  LivelineError,
  SDK_VERSION,
} from '../src/index.ts';
import { eventIdsOf, fakeLivelineFixture } from './fake-liveline.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Timers may fire a millisecond or so early; lower bounds on delays allow for that. */
const SLACK_MS = 5;

const fx = fakeLivelineFixture();
const device = (options?: Partial<LivelineDeviceOptions>) => fx.device(options);

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

/** An event the SDK's types would refuse, as an app built without them could send it. */
function untyped(event: Record<string, unknown>): ClientEvent {
  return event as unknown as ClientEvent;
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

    const [request] = fx.fake.requests;
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/client/v1/sessions');
    expect(request.headers.authorization).toBe(`Bearer ${fx.fake.token}`);
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

    expect(fx.fake.requests.map((request) => request.path)).toEqual([
      '/client/v1/sessions',
      `/client/v1/sessions/${sessionId}/events`,
      `/client/v1/sessions/${sessionId}/end`,
    ]);
    expect(fx.fake.storedIds(sessionId)).toHaveLength(3);
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
    expect(fx.fake.batches()).toHaveLength(2);
    expect(d.stats().buffered).toBe(1);

    await d.flush();
    expect(fx.fake.batches()).toEqual([
      tracked.slice(0, 3).map((event) => event.id),
      tracked.slice(3, 6).map((event) => event.id),
      [tracked[6].id],
    ]);
    expect(fx.fake.eventRequests()[0].path).toBe(`/client/v1/sessions/${sessionId}/events`);
    expect(fx.fake.eventRequests()[0].headers.authorization).toBe(`Bearer ${fx.fake.token}`);
  });

  it('sends a partial batch after flushIntervalMs', async () => {
    const d = device({ flushIntervalMs: 20 });
    const { sessionId } = await d.startSession();
    d.track(custom('a'));
    d.track(custom('b'));
    expect(fx.fake.eventRequests()).toHaveLength(0);

    await waitFor(() => d.stats().sent === 2);
    expect(fx.fake.storedIds(sessionId)).toHaveLength(2);
    expect(fx.fake.batches()).toHaveLength(1);
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
    const [request] = fx.fake.eventRequests();
    expect(request.body).toEqual({
      events: [
        { eventType: 'Health', fps: 72, batteryLevel: 80, id: filled.id, timestamp: now },
        { eventType: 'Custom', custom01: 'x', id: second.id, timestamp: now },
        { eventType: 'Design', eventId: 'level:boss', id: 'my-id', timestamp: 1_700_000_000_000 },
      ],
    });
    expect(fx.fake.storedIds(sessionId)).toEqual([filled.id, second.id, 'my-id']);
  });
});

describe('retries', () => {
  it('resends the same batch after 503s, with exponential backoff', async () => {
    const d = device({ retry: { initialDelayMs: 20, maxDelayMs: 1000 } });
    const { sessionId } = await d.startSession();
    fx.fake.failNext({ status: 503, code: 'unavailable' }, { status: 503, code: 'unavailable' });
    const ids = ['a', 'b', 'c'].map((label) => d.track(custom(label)).id);

    await d.flush();

    const attempts = fx.fake.eventRequests();
    expect(attempts).toHaveLength(3);
    for (const attempt of attempts) expect(eventIdsOf(attempt.body)).toEqual(ids);
    // random() = 1 makes full jitter pick the ceiling: 20 ms, then 40 ms.
    expect(attempts[1].at - attempts[0].at).toBeGreaterThanOrEqual(20 - SLACK_MS);
    expect(attempts[2].at - attempts[1].at).toBeGreaterThanOrEqual(40 - SLACK_MS);
    expect(fx.fake.storedIds(sessionId)).toEqual(ids);
    expect(d.stats()).toMatchObject({ sent: 3, retries: 2, rejected: 0, buffered: 0 });
  });

  it('honours Retry-After in seconds on a 429', async () => {
    // random() = 0 would make the backoff 0 ms: any wait comes from Retry-After.
    const d = device({ random: () => 0 });
    await d.startSession();
    fx.fake.failNext({ status: 429, code: 'rate_limited', headers: { 'retry-after': '1' } });
    d.track(custom('a'));

    await d.flush();

    const [first, second] = fx.fake.eventRequests();
    expect(second.at - first.at).toBeGreaterThanOrEqual(1000 - SLACK_MS);
    expect(eventIdsOf(second.body)).toEqual(eventIdsOf(first.body));
  });

  it('honours Retry-After as an HTTP date, measured with the injected clock', async () => {
    const retryAt = 1_750_000_000_000; // a whole second, as HTTP dates have no milliseconds
    const d = device({ random: () => 0, clock: { now: () => retryAt - 150 } });
    await d.startSession();
    fx.fake.failNext({
      status: 429,
      code: 'rate_limited',
      headers: { 'retry-after': new Date(retryAt).toUTCString() },
    });
    d.track(custom('a'));

    await d.flush();

    const [first, second] = fx.fake.eventRequests();
    expect(second.at - first.at).toBeGreaterThanOrEqual(150 - SLACK_MS);
  });

  it('buffers through a server outage and flushes in order once it is back on the same port', async () => {
    const d = device({ batchSize: 2 });
    const { sessionId } = await d.startSession();
    await fx.fake.stop();

    const ids = ['1', '2', '3', '4', '5'].map((label) => d.track(custom(label)).id);
    const flushed = d.flush();
    await waitFor(() => d.stats().retries >= 3);
    expect(d.stats().buffered).toBe(5);

    await fx.fake.restart();
    await flushed;

    expect(fx.fake.storedIds(sessionId)).toEqual(ids);
    expect(fx.fake.batches()).toEqual([ids.slice(0, 2), ids.slice(2, 4), ids.slice(4)]);
    expect(d.stats()).toMatchObject({ sent: 5, buffered: 0, dropped: 0, rejected: 0 });
  });

  it('resends after a lost response; the server dedupes by id', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    fx.fake.failNext('drop', 'storeThenDrop');
    const ids = ['a', 'b', 'c'].map((label) => d.track(custom(label)).id);

    await d.flush();

    expect(fx.fake.batches()).toEqual([ids, ids, ids]);
    expect(fx.fake.storedIds(sessionId)).toEqual(ids);
    expect(d.stats()).toMatchObject({ sent: 3, duplicates: 3, retries: 2 });
  });
});

describe('refusals', () => {
  it('drops a whole batch refused with a 400 that blames the batch, and reports it', async () => {
    const d = device({ batchSize: 2 });
    const { sessionId } = await d.startSession();
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    fx.fake.failNext('pass', {
      status: 400,
      body: {
        type: 'about:blank',
        title: 'Bad Request',
        status: 400,
        detail: 'events must contain at most 1 events',
        code: 'validation_failed',
        errors: [{ path: 'events', message: 'must contain at most 1 events' }],
      },
    });
    const ids = ['1', '2', '3', '4', '5', '6'].map((label) => d.track(custom(label)).id);

    await d.flush();

    expect(fx.fake.batches()).toEqual([ids.slice(0, 2), ids.slice(2, 4), ids.slice(4)]);
    expect(fx.fake.storedIds(sessionId)).toEqual([ids[0], ids[1], ids[4], ids[5]]);
    expect(d.stats()).toMatchObject({ sent: 4, rejected: 2, retries: 0, buffered: 0 });
    expect(errors).toHaveLength(1);
    expect(errors[0].error).toMatchObject({
      status: 400,
      code: 'validation_failed',
      detail: 'events must contain at most 1 events',
      errors: [{ path: 'events', message: 'must contain at most 1 events' }],
      retryable: false,
    });
    expect(errors[0].rejectedEvents.map((event) => event.id)).toEqual([ids[2], ids[3]]);
    expect(errors[0].rejections).toEqual([
      { event: errors[0].rejectedEvents[0], errors: [] },
      { event: errors[0].rejectedEvents[1], errors: [] },
    ]);
  });

  it('splits a batch refused with 413 instead of dropping it', async () => {
    const d = device({ batchSize: 4 });
    const { sessionId } = await d.startSession();
    fx.fake.failNext({ status: 413, code: 'payload_too_large' });
    const ids = ['1', '2', '3', '4'].map((label) => d.track(custom(label)).id);

    await d.flush();

    expect(fx.fake.batches()).toEqual([ids, ids.slice(0, 2), ids.slice(2)]);
    expect(fx.fake.storedIds(sessionId)).toEqual(ids);
    expect(d.stats()).toMatchObject({ sent: 4, rejected: 0 });
  });

  it('sends both halves of a batch split after a 413 at once, without newer events', async () => {
    const d = device({ batchSize: 4 });
    const { sessionId } = await d.startSession();
    fx.fake.failNext({ status: 413, code: 'payload_too_large' });
    const ids = ['1', '2', '3', '4'].map((label) => d.track(custom(label)).id); // full: sent at once
    ids.push(d.track(custom('5')).id);

    await waitFor(() => d.stats().sent === 4);

    expect(fx.fake.batches()).toEqual([ids.slice(0, 4), ids.slice(0, 2), ids.slice(2, 4)]);
    expect(fx.fake.storedIds(sessionId)).toEqual(ids.slice(0, 4));
    expect(d.stats()).toMatchObject({ buffered: 1 });
  });

  it('pauses on 401 keeping the events, and resumes after setToken()', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    fx.fake.token = 'rotated-token';
    const ids = ['a', 'b'].map((label) => d.track(custom(label)).id);

    await expect(d.flush()).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
    expect(errors).toHaveLength(1);
    expect(errors[0].rejectedEvents).toEqual([]);
    expect(d.pendingEvents().map((event) => event.id)).toEqual(ids);
    expect(d.stats()).toMatchObject({ rejected: 0, buffered: 2 });

    d.setToken('rotated-token');
    await d.flush();
    expect(fx.fake.storedIds(sessionId)).toEqual(ids);
  });
});

describe('partial resend', () => {
  it('drops only the invalid event of a refused batch and resends the rest at once, same ids', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    const a = d.track(custom('a'));
    const bad = d.track({ eventType: 'Health', fps: 72, cpuUsage: 140 });
    const c = d.track({ eventType: 'Progression', progressionStatus: 'Start', progression01: 'level-1' });

    await d.flush();

    expect(fx.fake.batches()).toEqual([
      [a.id, bad.id, c.id],
      [a.id, c.id],
    ]);
    expect(fx.fake.eventRequests()[1].body).toEqual({ events: [a, c] });
    expect(fx.fake.storedIds(sessionId)).toEqual([a.id, c.id]);
    expect(d.stats()).toEqual({ sent: 2, duplicates: 0, dropped: 0, rejected: 1, buffered: 0, retries: 0 });
    expect(errors).toHaveLength(1);
    expect(errors[0].error).toMatchObject({
      status: 400,
      code: 'validation_failed',
      errors: [{ path: 'events[1].cpuUsage', message: 'must be <= 100' }],
    });
    expect(errors[0].rejectedEvents).toEqual([bad]);
    expect(errors[0].rejections).toEqual([
      { event: bad, errors: [{ path: 'cpuUsage', message: 'must be <= 100' }] },
    ]);
  });

  it('resends the rest of a full batch at once, without waiting for a flush or newer events', async () => {
    const d = device({ batchSize: 3 });
    const { sessionId } = await d.startSession();
    const ids = [
      d.track(custom('a')).id,
      d.track(untyped({ eventType: 'Custom', custom01: 'b', custom11: 'x' })).id,
      d.track(custom('c')).id,
    ];

    await waitFor(() => d.stats().sent === 2);
    d.track(custom('d')); // waits for its own batch: it is not tacked onto the resend

    expect(fx.fake.batches()).toEqual([ids, [ids[0], ids[2]]]);
    expect(fx.fake.storedIds(sessionId)).toEqual([ids[0], ids[2]]);
    expect(d.stats()).toMatchObject({ sent: 2, rejected: 1, buffered: 1 });
  });

  it('reports every complaint about an event, relative to the event, and unknown types too', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    const good = d.track(custom('good'));
    const twoFaults = d.track({ eventType: 'Health', cpuUsage: 140, batteryLevel: -1 });
    const unknown = d.track(untyped({ eventType: 'Teleport' }));
    const stale = d.track({ ...custom('old'), timestamp: 946_684_799_999 });

    await d.flush();

    expect(fx.fake.storedIds(sessionId)).toEqual([good.id]);
    expect(errors).toHaveLength(1);
    expect(errors[0].error.errors.map((error) => error.path)).toEqual([
      'events[1].cpuUsage',
      'events[1].batteryLevel',
      'events[2].eventType',
      'events[3].timestamp',
    ]);
    expect(errors[0].rejections.map(({ event, errors }) => [event.id, errors.map((e) => e.path)])).toEqual([
      [twoFaults.id, ['cpuUsage', 'batteryLevel']],
      [unknown.id, ['eventType']],
      [stale.id, ['timestamp']],
    ]);
    expect(d.stats()).toMatchObject({ sent: 1, rejected: 3 });
  });

  it('answers unknown_event_type alone with a partial resend as well', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    const unknown = d.track(untyped({ eventType: 'Teleport' }));
    const good = d.track(custom('good'));

    await d.flush();

    expect(errors[0].error.code).toBe('unknown_event_type');
    expect(errors[0].rejectedEvents).toEqual([unknown]);
    expect(fx.fake.storedIds(sessionId)).toEqual([good.id]);
  });

  it('drops the whole batch when any error path is not event-specific', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    const refusal = (errorList: { path: string; message: string }[] | undefined) => ({
      status: 400,
      body: {
        status: 400,
        code: 'validation_failed',
        detail: 'no',
        ...(errorList ? { errors: errorList } : {}),
      },
    });
    fx.fake.failNext(
      refusal([
        { path: 'events[0].timestamp', message: 'bad' },
        { path: 'events', message: 'bad' },
      ]),
      refusal([{ path: '', message: 'must be an object' }]),
      refusal(undefined),
      refusal([{ path: 'events[2].id', message: 'beyond the batch' }]),
      refusal([{ path: 'events[0]x', message: 'not an event path' }]),
      {
        status: 422,
        body: { status: 422, code: 'unprocessable', errors: [{ path: 'events[0]', message: 'bad' }] },
      },
    );
    for (let round = 0; round < 6; round++) {
      d.track(custom(`${round}-a`));
      d.track(custom(`${round}-b`));
      await d.flush();
    }

    expect(fx.fake.batches()).toHaveLength(6);
    expect(fx.fake.storedIds(sessionId)).toEqual([]);
    expect(d.stats()).toMatchObject({ sent: 0, rejected: 12, buffered: 0 });
    expect(errors.map((error) => error.rejectedEvents.length)).toEqual([2, 2, 2, 2, 2, 2]);
    // The event-specific complaints are still handed out per event.
    expect(errors[0].rejections.map((rejection) => rejection.errors)).toEqual([
      [{ path: 'timestamp', message: 'bad' }],
      [],
    ]);
  });

  it('drops everything and resends nothing when every event is invalid', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    d.track({ eventType: 'Health', cpuUsage: 101 });
    d.track({ eventType: 'Health', batteryLevel: 101 });

    await d.flush();

    expect(fx.fake.batches()).toHaveLength(1);
    expect(fx.fake.storedIds(sessionId)).toEqual([]);
    expect(d.stats()).toMatchObject({ sent: 0, rejected: 2, buffered: 0 });
  });

  it('handles a resend refused again the same way, pass after pass, until the rest is accepted', async () => {
    fx.fake.maxReportedErrors = 2; // like the real server's cap of 50: the first answer names only some
    const d = device();
    const { sessionId } = await d.startSession();
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    const events = ['ok', 'bad', 'bad', 'ok', 'bad', 'bad', 'bad', 'ok'].map((kind) =>
      kind === 'ok' ? d.track(custom(kind)) : d.track({ eventType: 'Health', cpuUsage: 200 }),
    );
    const ids = events.map((event) => event.id);

    await d.flush();

    expect(fx.fake.batches()).toEqual([
      ids,
      [ids[0], ids[3], ids[4], ids[5], ids[6], ids[7]],
      [ids[0], ids[3], ids[6], ids[7]],
      [ids[0], ids[3], ids[7]],
    ]);
    expect(errors.map((error) => error.rejectedEvents.map((event) => event.id))).toEqual([
      [ids[1], ids[2]],
      [ids[4], ids[5]],
      [ids[6]],
    ]);
    expect(fx.fake.storedIds(sessionId)).toEqual([ids[0], ids[3], ids[7]]);
    expect(d.stats()).toMatchObject({ sent: 3, rejected: 5, buffered: 0, retries: 0 });
  });

  it('drops the rest when a resend is refused as a whole, and retries a resend after a 503', async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    fx.fake.failNext('pass', { status: 503, code: 'unavailable' }, 'pass', 'pass', {
      status: 400,
      body: { status: 400, code: 'validation_failed', errors: [{ path: 'events', message: 'no' }] },
    });
    const first = [
      d.track(custom('1')),
      d.track({ eventType: 'Health', cpuUsage: 101 }),
      d.track(custom('3')),
    ];
    await d.flush();
    const second = [
      d.track(custom('4')),
      d.track({ eventType: 'Health', cpuUsage: 101 }),
      d.track(custom('6')),
    ];
    await d.flush();

    expect(fx.fake.batches()).toEqual([
      first.map((event) => event.id),
      [first[0].id, first[2].id], // 503
      [first[0].id, first[2].id], // stored
      second.map((event) => event.id),
      [second[0].id, second[2].id], // refused whole
    ]);
    expect(fx.fake.storedIds(sessionId)).toEqual([first[0].id, first[2].id]);
    expect(errors.map((error) => error.rejectedEvents)).toEqual([
      [first[1]],
      [second[1]],
      [second[0], second[2]],
    ]);
    expect(d.stats()).toMatchObject({ sent: 2, rejected: 4, retries: 1, buffered: 0 });
  });

  it('keeps later batches in order behind a partial resend', async () => {
    const d = device({ batchSize: 2 });
    const { sessionId } = await d.startSession();
    const events = [
      d.track({ eventType: 'Health', cpuUsage: 101 }),
      d.track(custom('2')),
      d.track(custom('3')),
      d.track(custom('4')),
      d.track(custom('5')),
    ];
    await d.flush();

    expect(fx.fake.batches()).toEqual([
      [events[0].id, events[1].id],
      [events[1].id],
      [events[2].id, events[3].id],
      [events[4].id],
    ]);
    expect(fx.fake.storedIds(sessionId)).toEqual(events.slice(1).map((event) => event.id));
  });

  it('keeps the rest of a batch when a listener tracks enough events to overflow the buffer', async () => {
    const d = device({ batchSize: 3, maxBufferedEvents: 3 });
    const { sessionId } = await d.startSession();
    const late: string[] = [];
    d.on('error', () => {
      for (const label of ['x', 'y', 'z']) late.push(d.track(custom(label)).id);
    });
    const events = [
      d.track(custom('a')),
      d.track({ eventType: 'Health', cpuUsage: 101 }),
      d.track(custom('c')),
    ];
    await d.flush();

    // The buffer held the 2 events left of the batch and 1 more: x and y were dropped, not a or c.
    expect(fx.fake.batches()).toEqual([events.map((event) => event.id), [events[0].id, events[2].id]]);
    expect(d.pendingEvents().map((event) => event.id)).toEqual([late[2]]);
    expect(d.stats()).toMatchObject({ sent: 2, rejected: 1, dropped: 2, buffered: 1 });
    await d.flush();
    expect(fx.fake.storedIds(sessionId)).toEqual([events[0].id, events[2].id, late[2]]);
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
    expect(labelsOf(fx.fake.sessions.get(sessionId)?.events ?? [])).toEqual(labels.slice(3));
  });

  it('never drops the batch in flight when the buffer overflows', async () => {
    const d = device({ batchSize: 2, maxBufferedEvents: 3 });
    const { sessionId } = await d.startSession();
    await fx.fake.stop();
    const ids = ['1', '2'].map((label) => d.track(custom(label)).id); // a full batch: in flight at once
    await waitFor(() => d.stats().retries >= 1);

    ids.push(...['3', '4', '5'].map((label) => d.track(custom(label)).id));
    expect(d.stats()).toMatchObject({ dropped: 2, buffered: 3 });

    await fx.fake.restart();
    await d.flush();
    expect(fx.fake.storedIds(sessionId)).toEqual([ids[0], ids[1], ids[4]]);
    expect(d.stats()).toMatchObject({ sent: 3, dropped: 2, buffered: 0 });
  });

  it('close() stops sending, rejects pending flushes and keeps the events', async () => {
    const d = device();
    await d.startSession();
    await fx.fake.stop();
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
