import { afterEach, describe, expect, it } from 'vitest';
import { WebhookSender } from '../../src/modules/webhooks/sender.ts';
import { type Receiver, startReceiver } from '../helpers/receiver.ts';

/**
 * The HTTP side of an attempt against real local receivers: the SSRF guard at connect time (names
 * are checked on every resolution, so a name re-pointed at an internal address after registration is
 * refused), no redirects followed, the timeout.
 */
describe('webhook sender', () => {
  const receivers: Receiver[] = [];
  const senders: WebhookSender[] = [];
  afterEach(async () => {
    for (const s of senders.splice(0)) await s.close();
    for (const r of receivers.splice(0)) await r.close();
  });
  const sender = (allowPrivate: boolean, timeoutMs = 10_000) => {
    const s = new WebhookSender({ allowPrivate, timeoutMs, connectionsPerOrigin: 4 });
    senders.push(s);
    return s;
  };
  const receiver = async (...args: Parameters<typeof startReceiver>) => {
    const r = await startReceiver(...args);
    receivers.push(r);
    return r;
  };
  const never = new AbortController().signal;

  it('refuses loopback targets at connect time unless private targets are allowed', async () => {
    const r = await receiver();
    const guarded = sender(false);
    for (const url of [
      r.url,
      `http://localhost:${r.port}/hooks`,
      `http://[::ffff:127.0.0.1]:${r.port}/hooks`,
    ]) {
      const outcome = await guarded.send(url, {}, '{}', never);
      expect(outcome.ok, url).toBe(false);
      expect(outcome.statusCode).toBeNull();
      expect(outcome.error, url).toMatch(
        /^refused: .* is not allowed: webhooks may reach public addresses only$/,
      );
      expect(outcome.error, url).not.toMatch(/loopback/);
    }
    expect(r.received).toHaveLength(0);
    const open = await sender(true).send(r.url, { 'webhook-id': 'm1' }, '{"a":1}', never);
    expect(open).toMatchObject({ ok: true, statusCode: 200, error: null });
    expect(r.received[0]).toMatchObject({ id: 'm1', body: '{"a":1}' });
    expect(r.received[0].headers['content-type']).toBe('application/json');
  });

  it('does not follow redirects', async () => {
    const target = await receiver();
    const r = await receiver({ behaviour: () => 302 });
    const outcome = await sender(true).send(r.url, {}, '{}', never);
    expect(outcome).toMatchObject({ ok: false, statusCode: 302, error: 'redirects are not followed' });
    expect(target.received).toHaveLength(0);
  });

  it('gives up on a receiver that does not answer in time', async () => {
    const r = await receiver({ behaviour: () => 'hang' });
    const started = Date.now();
    const outcome = await sender(true, 300).send(r.url, {}, '{}', never);
    expect(outcome).toMatchObject({ ok: false, statusCode: null, error: 'timed out' });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('counts only 2xx as delivered and reports the status of anything else', async () => {
    let status = 204;
    const r = await receiver({ behaviour: () => status });
    const s = sender(true);
    expect(await s.send(r.url, {}, '{}', never)).toMatchObject({ ok: true, statusCode: 204 });
    status = 410;
    expect(await s.send(r.url, {}, '{}', never)).toMatchObject({
      ok: false,
      statusCode: 410,
      error: 'HTTP 410',
    });
    const dropped = await sender(true).send(
      (await receiver({ behaviour: () => 'drop' })).url,
      {},
      '{}',
      never,
    );
    expect(dropped.ok).toBe(false);
    expect(dropped.statusCode).toBeNull();
  });
});
