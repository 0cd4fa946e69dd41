import { afterEach, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken } from '../helpers/api.ts';
import { type ServerProcess, sleep, startProcess } from '../helpers/process.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, backends, freshStore } from '../helpers/server.ts';

/**
 * The events the server emits itself (CONTRACT §2) are written in the transaction of the state
 * change they report, with their webhook outbox rows. Devices start and stop streams and
 * recordings, end sessions (by the route and by a SessionEnd event) or go silent (the idle and
 * disconnect sweeps end and stop them), while the server process is SIGKILLed again and again.
 * After the last restart, on the same store:
 * - every change the server acknowledged (a 200) has its event;
 * - no state without its event and no event without its state: a session's open stream (and
 *   recording) is exactly the one whose start has no stop, an ended session has its SessionEnd and a
 *   live one none;
 * - every stored event has its `session.event` outbox row, and every such row its event.
 */

type Json = Record<string, unknown>;

interface SessionView extends Json {
  sessionId: string;
  status: 'live' | 'ended';
  stream: { state: string; streamingSessionId: string | null };
  recording: { state: string; recordingId: string | null };
  events: Json[];
}

/** A change the server answered 200 for, and the event that must report it. */
interface Acknowledged {
  sessionId: string;
  eventType: 'StreamStarted' | 'StreamStopped' | 'RecordingStarted' | 'RecordingStopped' | 'SessionEnd';
  /** The streamingSessionId, recordingId, or (for a device's SessionEnd) the event's own id. */
  key: string | null;
}

const CYCLES = 5;
const SLOTS = 12;
const COHORT = 'crash-cohort';

const pick = <T>(items: T[]) => items[Math.floor(Math.random() * items.length)];

describe.each(backends)('server-emitted events survive a SIGKILL with their state (%s)', (backend) => {
  const stores: ReturnType<typeof freshStore>[] = [];
  const processes: ServerProcess[] = [];
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const p of processes.splice(0)) p.child.kill('SIGKILL');
    for (const close of closers.splice(0)) await close();
    for (const s of stores.splice(0)) await s.destroy();
  });

  it('every acknowledged change has its event and outbox row; no event without its change', async () => {
    const store = freshStore(backend);
    stores.push(store);
    const receiver = await startReceiver();
    closers.push(() => receiver.stop());
    const env = {
      ...store.env,
      LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
      // The default durability (synchronous=FULL on SQLite), not the tests' faster setting.
      LIVELINE_SQLITE_SYNCHRONOUS: 'FULL',
      LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
      LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
    };
    // While crashing, silent devices are swept soon: their stops and ends are killed midway too.
    const crashing = { ...env, LIVELINE_STREAM_GRACE_S: '1', LIVELINE_SESSION_IDLE_TIMEOUT_S: '3' };

    let server = await startProcess(crashing, { timeoutMs: 60_000 });
    processes.push(server);
    const tenant = await createTenant(server.url, ADMIN_TOKEN);
    const hook = await call(server.url, 'POST', '/webhooks', {
      token: tenant.token,
      json: { url: receiver.url, types: ['session.event'] },
    });
    expect(hook.status).toBe(201);
    const webhookId = String(hook.body.webhookId);
    const tokens = await Promise.all(
      Array.from({ length: 4 }, (_, i) => deviceToken(server.url, tenant.token, `player-${i}`, COHORT)),
    );

    const acknowledged: Acknowledged[] = [];
    const sessionIds = new Set<string>();

    /** One device's life, over and over, until the process dies under it. */
    async function device(url: string, token: string, alive: () => boolean) {
      const post = async (path: string, json: unknown = {}) => {
        const res = await call<Json>(url, 'POST', path, { token, json });
        return res.status === 200 || res.status === 201 ? res.body : null;
      };
      while (alive()) {
        const created = await post('/client/v1/sessions');
        if (!created) continue;
        const sessionId = String(created.sessionId);
        sessionIds.add(sessionId);
        const at = `/client/v1/sessions/${sessionId}`;
        const ack = (eventType: Acknowledged['eventType'], key: unknown) =>
          acknowledged.push({ sessionId, eventType, key: key === null ? null : String(key) });
        for (let round = 1 + Math.floor(Math.random() * 3); round > 0 && alive(); round--) {
          const started = await post(`${at}/stream/start`, { resolution: 1, aspectratio: 0 });
          if (started) ack('StreamStarted', started.streamingSessionId);
          if (Math.random() < 0.6) {
            const recording = await post(`${at}/record/start`);
            if (recording) ack('RecordingStarted', recording.recordingId);
            // Sometimes the recording is left running: it stops with its stream.
            const recorded = Math.random() < 0.7 ? await post(`${at}/record/stop`) : null;
            if (recorded) ack('RecordingStopped', recorded.recordingId);
          }
          // Sometimes the stream is left running: the session's end or the sweep stops it.
          if (round > 1 || Math.random() < 0.6) {
            const stopped = await post(`${at}/stream/stop`);
            if (stopped) ack('StreamStopped', stopped.streamingSessionId);
          }
        }
        const end = pick(['route', 'event', 'silent'] as const);
        if (end === 'route') {
          if (await post(`${at}/end`)) ack('SessionEnd', null);
        } else if (end === 'event') {
          const id = `end-${sessionId}`;
          const event = { id, eventType: 'SessionEnd', timestamp: Date.now(), duration: 1, reason: 'user' };
          if (await post(`${at}/events`, { events: [event] })) ack('SessionEnd', id);
        }
        // 'silent': the device just goes away; the sweeps stop its stream and end the session.
      }
    }

    for (let cycle = 0; cycle < CYCLES; cycle++) {
      if (cycle > 0) {
        server = await startProcess(crashing, { timeoutMs: 60_000 });
        processes.push(server);
      }
      let killed = false;
      const url = server.url;
      const devices = Array.from({ length: SLOTS }, (_, i) =>
        device(url, tokens[i % tokens.length], () => !killed).catch(() => {}),
      );
      // The kill lands at a different point of the traffic each time: after a random number of
      // acknowledged changes in this cycle (a timer would mostly hit a process still warming up).
      const target = acknowledged.length + 10 + Math.floor(Math.random() * 40);
      for (const deadline = Date.now() + 30_000; acknowledged.length < target && Date.now() < deadline; )
        await sleep(5);
      killed = true;
      server.child.kill('SIGKILL');
      await server.exited;
      await Promise.all(devices);
    }
    expect(acknowledged.length).toBeGreaterThanOrEqual(CYCLES * 10);

    // Nothing moves while the outcome is read: no sweep acts on the silent sessions.
    const final = await startProcess(
      { ...env, LIVELINE_STREAM_GRACE_S: '86400', LIVELINE_SESSION_IDLE_TIMEOUT_S: '86400' },
      { timeoutMs: 60_000 },
    );
    processes.push(final);
    const get = <T>(path: string) =>
      call<T>(final.url, 'GET', path, { token: tenant.token }).then((res) => {
        if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${res.text}`);
        return res.body;
      });
    // Every session, also those whose creation was never answered.
    const listed = await get<{ sessions: { sessionId: string }[]; totalCount: number }>(
      `/cohorts/${COHORT}/sessions`,
    );
    expect(listed.totalCount).toBeLessThan(1000);
    for (const id of sessionIds) expect(listed.sessions.map((s) => s.sessionId)).toContain(id);
    const sessions = new Map<string, SessionView>();
    for (const { sessionId } of listed.sessions)
      sessions.set(sessionId, await get<SessionView>(`/sessions/${sessionId}`));

    // Every acknowledged change has its event.
    const missing = acknowledged.filter(({ sessionId, eventType, key }) => {
      const events = sessions.get(sessionId)?.events ?? [];
      return !events.some(
        (e) =>
          e.eventType === eventType &&
          (key === null ||
            e.streamingSessionId === key ||
            e.recordingId === key ||
            (eventType === 'SessionEnd' && e.id === key)),
      );
    });
    expect(missing).toEqual([]);

    // No state without its event, no event without its state.
    const inconsistent: string[] = [];
    for (const s of sessions.values()) {
      inconsistent.push(...consistency(s).map((problem) => `${s.sessionId}: ${problem}`));
    }
    expect(inconsistent).toEqual([]);

    // Every stored event has its outbox row, and every row its event.
    const stored = new Set<string>();
    for (const s of sessions.values()) for (const e of s.events) stored.add(`${s.sessionId}/${e.id}`);
    // The ingest transaction writes the webhook fan-out row; the dispatcher expands it into the
    // deliveries the log lists, a few hundred at a time: the log is read until it has caught up.
    const readOutbox = async () => {
      const keys = new Set<string>();
      let after: string | null = null;
      do {
        const page: { deliveries: { payload: { data: Json } }[]; nextCursor: string | null } = await get(
          `/webhooks/${webhookId}/deliveries?limit=1000${after ? `&after=${after}` : ''}`,
        );
        for (const d of page.deliveries) keys.add(`${d.payload.data.sessionId}/${d.payload.data.id}`);
        after = page.nextCursor;
      } while (after);
      return keys;
    };
    let outbox = await readOutbox();
    for (let waited = 0; waited < 60_000 && [...stored].some((k) => !outbox.has(k)); waited += 500) {
      await sleep(500);
      outbox = await readOutbox();
    }
    expect([...stored].filter((key) => !outbox.has(key))).toEqual([]);
    expect([...outbox].filter((key) => !stored.has(key))).toEqual([]);
  }, 300_000);
});

/** What is wrong between a session's state and its events (nothing, when they agree). */
function consistency(s: SessionView): string[] {
  const problems: string[] = [];
  const of = (type: string, key: string) =>
    s.events.filter((e) => e.eventType === type).map((e) => String(e[key]));
  const pairs = (started: string[], stopped: string[], what: string) => {
    for (const id of stopped)
      if (!started.includes(id)) problems.push(`${what} ${id} stopped, never started`);
    if (new Set(started).size !== started.length) problems.push(`a ${what} started twice`);
    if (new Set(stopped).size !== stopped.length) problems.push(`a ${what} stopped twice`);
    return started.filter((id) => !stopped.includes(id));
  };
  const openStreams = pairs(
    of('StreamStarted', 'streamingSessionId'),
    of('StreamStopped', 'streamingSessionId'),
    'stream',
  );
  const streaming = s.stream.state === 'streaming' || s.stream.state === 'stopping';
  const expectedStream = streaming ? [s.stream.streamingSessionId] : [];
  if (JSON.stringify(openStreams) !== JSON.stringify(expectedStream))
    problems.push(
      `stream ${s.stream.state} ${s.stream.streamingSessionId}, events leave open: ${openStreams}`,
    );
  const openRecordings = pairs(
    of('RecordingStarted', 'recordingId'),
    of('RecordingStopped', 'recordingId'),
    'recording',
  );
  const recording = s.recording.state === 'recording' || s.recording.state === 'stopping';
  const expectedRecording = recording ? [s.recording.recordingId] : [];
  if (JSON.stringify(openRecordings) !== JSON.stringify(expectedRecording))
    problems.push(
      `recording ${s.recording.state} ${s.recording.recordingId}, events leave open: ${openRecordings}`,
    );
  // A device's SessionEnd has the device's id; the server's are UUIDs it made (at most one).
  const ends = s.events.filter((e) => e.eventType === 'SessionEnd');
  const serverEnds = ends.filter((e) => !String(e.id).startsWith('end-'));
  if (s.status === 'live' && ends.length > 0) problems.push('live, with a SessionEnd');
  if (s.status === 'ended' && ends.length === 0) problems.push('ended, without a SessionEnd');
  if (serverEnds.length > 1) problems.push(`${serverEnds.length} SessionEnd events of the server`);
  return problems;
}
