import { describe, expect, it } from 'vitest';
import { compileFrameReader } from './frames.ts';
import {
  DEVICE_MESSAGE_SCHEMAS,
  type DeviceMessage,
  MAX_ACK_ERROR_JSON_LENGTH,
  SERVER_MESSAGE_SCHEMAS,
  type ServerMessage,
} from './messages.ts';

const readDevice = compileFrameReader<DeviceMessage>(DEVICE_MESSAGE_SCHEMAS);
const readServer = compileFrameReader<ServerMessage>(SERVER_MESSAGE_SCHEMAS);

describe('device frames', () => {
  it.each([
    ['{"type":"heartbeat"}', 'message'],
    ['{"type":"ack","commandId":"c","ok":true}', 'message'],
    ['{"type":"ack","commandId":"c","ok":false,"error":{"why":"busy"}}', 'message'],
    ['{"type":"events","events":[],"requestId":"r"}', 'message'],
    // The batch itself is the events module's to judge (so the refusal carries the requestId).
    ['{"type":"events"}', 'message'],
    ['not json', 'notJson'],
    ['[1]', 'notMessage'],
    ['{"type":1}', 'notMessage'],
    ['{"type":"teleport"}', 'unknownType'],
    ['{"type":"ack"}', 'invalid'],
    ['{"type":"ack","commandId":"","ok":true}', 'invalid'],
    [JSON.stringify({ type: 'events', requestId: 'r'.repeat(129) }), 'invalid'],
  ])('%s is %s', (frame, kind) => {
    expect(readDevice(frame).kind).toBe(kind);
  });

  it('bounds an ack’s error by its JSON length and says so', () => {
    const fits = 'x'.repeat(MAX_ACK_ERROR_JSON_LENGTH - 2);
    expect(readDevice(JSON.stringify({ type: 'ack', commandId: 'c', ok: false, error: fits })).kind).toBe(
      'message',
    );
    const reading = readDevice(JSON.stringify({ type: 'ack', commandId: 'c', ok: false, error: `${fits}x` }));
    expect(reading).toMatchObject({
      kind: 'invalid',
      type: 'ack',
      errors: [
        { path: 'error', message: `must hold at most ${MAX_ACK_ERROR_JSON_LENGTH} characters of JSON` },
      ],
    });
  });
});

describe('server frames', () => {
  it('reads each type and keeps fields of a newer server', () => {
    const welcome = readServer('{"type":"welcome","sessionId":"s","heartbeatIntervalMs":15000,"extra":1}');
    expect(welcome).toEqual({
      kind: 'message',
      message: { type: 'welcome', sessionId: 's', heartbeatIntervalMs: 15000, extra: 1 },
    });
    for (const frame of [
      { type: 'command', commandId: 'c', name: 'text', data: 'hi', issuedAt: 1 },
      { type: 'events.ack', accepted: 2, duplicates: 0, requestId: 'r' },
      {
        type: 'error',
        code: 'validation_failed',
        message: 'no',
        errors: [{ path: 'events[0].id', message: 'x' }],
      },
    ]) {
      expect(readServer(JSON.stringify(frame)).kind).toBe('message');
    }
  });

  it('names what is wrong with a frame, with paths like the server’s problems', () => {
    const reading = readServer(
      JSON.stringify({ type: 'error', code: 'x', message: 'm', errors: [{ path: 'a', message: 3 }] }),
    );
    expect(reading).toMatchObject({ kind: 'invalid', type: 'error' });
    expect(reading.kind === 'invalid' && reading.errors[0].path).toBe('errors[0].message');
    expect(readServer('{"type":"events.ack","accepted":-1,"duplicates":0}').kind).toBe('invalid');
    expect(readServer('{"type":"presence"}').kind).toBe('unknownType');
  });
});
