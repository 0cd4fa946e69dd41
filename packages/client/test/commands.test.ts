import { describe, expect, it } from 'vitest';
import { type AckMessage, CommandRouter, MalformedCommandError, parseCommand } from '../src/commands.ts';
import type { RealtimeCommand } from '../src/index.ts';

const command = (name: string, data: unknown, commandId = `c-${Math.random()}`): RealtimeCommand => ({
  commandId,
  name,
  data,
  issuedAt: 1,
});

describe('parseCommand', () => {
  it('types custom variables by their declared types', () => {
    expect(
      parseCommand(
        command('cfg', {
          names: ['s', 'b1', 'b0', 'i', 'f', 'e', '__proto__'],
          types: ['string', 'bool', 'bool', 'int', 'float', 'float', 'string'],
          values: ['007', 'true', 'false', '-2147483648', '.5', '1e3', 'kept'],
        }),
      ),
    ).toEqual({
      kind: 'custom',
      name: 'cfg',
      variables: Object.fromEntries([
        ['s', '007'],
        ['b1', true],
        ['b0', false],
        ['i', -2147483648],
        ['f', 0.5],
        ['e', 1000],
        ['__proto__', 'kept'],
      ]),
    });
  });

  it('types camera controls, skipping names this SDK does not know', () => {
    expect(
      parseCommand(
        command('camera', {
          controls: [
            { name: 'smoothingAmount', value: '0' },
            { name: 'followDistance', value: '12.25' },
            { name: 'lookType', value: '2' },
            { name: 'zoom', value: '3' },
          ],
        }),
      ),
    ).toEqual({ kind: 'camera', controls: { smoothingAmount: 0, followDistance: 12.25, lookType: 2 } });
  });

  it.each([
    ['text', 42],
    ['camera', { controls: [{ name: 'fieldOfView', value: '500' }] }],
    ['camera', { controls: [{ name: 'cameraView', value: '1.5' }] }],
    ['camera', { controls: [{ name: 'fieldOfView', value: '' }] }],
    ['camera', {}],
    ['stream.start', { resolution: 9, aspectratio: 0, streamingSessionId: 's' }],
    ['stream.start', { resolution: 0, aspectratio: 0 }],
    ['record.start', {}],
    ['cfg', { names: ['a'], types: ['int'], values: ['1.5'] }],
    ['cfg', { names: ['a'], types: ['bool'], values: ['yes'] }],
    ['cfg', { names: ['a'], types: ['long'], values: ['1'] }],
    ['cfg', { names: ['a', 'b'], types: ['int'], values: ['1'] }],
    ['cfg', 'text'],
  ])('refuses a malformed %s command: %j', (name, data) => {
    expect(() => parseCommand(command(name, data))).toThrow(MalformedCommandError);
  });
});

describe('CommandRouter', () => {
  it('remembers a bounded number of recent ids', async () => {
    const acks: AckMessage[] = [];
    const router = new CommandRouter(
      (ack) => acks.push(ack),
      () => {},
      2,
    );
    const seen: string[] = [];
    router.set('text', (text) => {
      seen.push(text);
    });
    for (const id of ['a', 'b', 'c']) router.receive(command('text', id, id));
    await router.idle();
    router.receive(command('text', 'c again', 'c'));
    router.receive(command('text', 'a again', 'a'));
    await router.idle();
    // `c` is remembered and answered again; `a` was forgotten (the oldest of three) and runs again.
    expect(seen).toEqual(['a', 'b', 'c', 'a again']);
    expect(acks.map((a) => a.commandId)).toEqual(['a', 'b', 'c', 'c', 'a']);
  });

  it('cuts very long error messages and stringifies non-errors', async () => {
    const acks: AckMessage[] = [];
    const router = new CommandRouter((ack) => acks.push(ack));
    router.set('text', (text) => {
      if (text === 'long') throw new Error('x'.repeat(5000));
      throw { reason: 'busy' };
    });
    router.receive(command('text', 'long'));
    router.receive(command('text', 'object'));
    await router.idle();
    const [long, object] = acks as Extract<AckMessage, { ok: false }>[];
    expect(long.error).toHaveLength(1024);
    expect(object.error).toBe('{"reason":"busy"}');
  });
  it('a cancelled command: waiting never runs, running is aborted, neither is answered; answered and unknown are reported', async () => {
    const acks: AckMessage[] = [];
    const router = new CommandRouter((ack) => acks.push(ack));
    const ran: string[] = [];
    let signal: AbortSignal | undefined;
    let finish = () => {};
    router.set('text', async (text, cmd) => {
      ran.push(text);
      if (text !== 'slow') return;
      signal = cmd.signal;
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
    });
    router.receive(command('text', 'done', 'd'));
    await router.idle();
    router.receive(command('text', 'slow', 's'));
    router.receive(command('text', 'behind', 'b'));
    await Promise.resolve();
    expect(ran).toEqual(['done', 'slow']);
    expect(router.cancel('b')).toMatchObject({
      commandId: 'b',
      stage: 'waiting',
      command: { data: 'behind' },
    });
    expect(router.cancel('s')).toMatchObject({ commandId: 's', stage: 'running', command: { data: 'slow' } });
    expect(signal?.aborted).toBe(true);
    expect(router.cancel('d')).toEqual({ commandId: 'd', stage: 'answered', command: null });
    expect(router.cancel('never')).toEqual({ commandId: 'never', stage: 'unknown', command: null });
    finish();
    await router.idle();
    expect(ran).toEqual(['done', 'slow']);
    expect(acks.map((a) => a.commandId)).toEqual(['d']);
    // A repeat of a cancelled command is dropped, not run.
    router.receive(command('text', 'behind', 'b'));
    await router.idle();
    expect(ran).toEqual(['done', 'slow']);
  });
});
