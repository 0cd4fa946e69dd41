import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { generateSecret, sign, signatureHeader, webhookHeaders } from './signing.ts';

describe('Standard Webhooks signing', () => {
  // The example of the Standard Webhooks specification.
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const id = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
  const body = '{"test": 2432232314}';

  it('matches the specification example', () => {
    expect(sign(secret, id, 1614265330, body)).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('is verified by the standardwebhooks package', () => {
    const s = generateSecret();
    const headers = webhookHeaders([s], id, Date.now(), body);
    expect(new Webhook(s).verify(body, headers)).toEqual({ test: 2432232314 });
    expect(() => new Webhook(generateSecret()).verify(body, headers)).toThrow();
    expect(() => new Webhook(s).verify(`${body} `, headers)).toThrow();
  });

  it('signs with every active secret, space-separated, each verifying alone', () => {
    const [a, b] = [generateSecret(), generateSecret()];
    const headers = webhookHeaders([a, b], id, Date.now(), body);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(a).verify(body, headers)).toBeTruthy();
    expect(new Webhook(b).verify(body, headers)).toBeTruthy();
    expect(signatureHeader([a], id, 1, body)).toBe(sign(a, id, 1, body));
  });

  it('sends the timestamp in seconds and the id unchanged', () => {
    const headers = webhookHeaders([generateSecret()], id, 1_700_000_000_999, body);
    expect(headers['webhook-timestamp']).toBe('1700000000');
    expect(headers['webhook-id']).toBe(id);
  });

  it('makes secrets of 32 random bytes with the whsec_ prefix', () => {
    const s = generateSecret();
    expect(s).toMatch(/^whsec_/);
    expect(Buffer.from(s.slice(6), 'base64')).toHaveLength(32);
    expect(generateSecret()).not.toBe(s);
  });
});
