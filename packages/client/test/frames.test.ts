import { describe, expect, it } from 'vitest';
import type { DeviceErrorEvent, RealtimeCommand } from '../src/index.ts';
import { fakeLivelineFixture } from './fake-liveline.ts';

// Server frames are checked against the schemas of @liveline/protocol before the SDK acts on them.
const fx = fakeLivelineFixture();

async function waitFor(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

async function connected() {
  const d = fx.device();
  const { sessionId } = await d.startSession();
  await d.connect();
  const ws = fx.fake.connections[0].ws;
  return { device: d, sessionId, send: (frame: unknown) => ws.send(JSON.stringify(frame)) };
}

describe('frames from the server', () => {
  it('drops frames it cannot read and types of a newer server, and keeps going', async () => {
    const { device: d, send } = await connected();
    const commands: RealtimeCommand[] = [];
    const errors: DeviceErrorEvent[] = [];
    d.on('command', (c) => commands.push(c));
    d.on('error', (e) => errors.push(e));
    d.onText(() => {});
    send({ type: 'command', commandId: 'c-0', name: 'text', data: 'no issuedAt' });
    send({ type: 'presence', who: [] });
    send({ type: 'error', code: 'x', message: 3 });
    send({ type: 'command', commandId: 'c-1', name: 'text', data: 'hi', issuedAt: 5, extra: true });
    await waitFor(() => commands.length === 1);
    expect(commands).toEqual([{ commandId: 'c-1', name: 'text', data: 'hi', issuedAt: 5 }]);
    expect(errors).toEqual([]);
    expect(d.connected).toBe(true);
  });

  it('sends a batch over HTTP at once when its answer on the socket cannot be read', async () => {
    const { device: d, sessionId, send } = await connected();
    fx.fake.answerSocketEvents = false;
    const event = d.track({ eventType: 'Custom', custom01: 'a' });
    const flushed = d.flush();
    await waitFor(() => fx.fake.socketMessages('events').length === 1);
    const [message] = fx.fake.socketMessages('events');
    send({ type: 'events.ack', accepted: 'one', duplicates: 0, requestId: message.requestId });
    await flushed;
    expect(fx.fake.storedIds(sessionId)).toEqual([event.id]);
    expect(fx.fake.eventRequests()).toHaveLength(1);
  });
});
