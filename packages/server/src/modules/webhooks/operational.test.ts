import { describe, expect, it } from 'vitest';
import { type EndpointFilter, matches } from './endpoint-cache.ts';
import { endpointDisabled, endpointRecovered, isOperational, OPERATIONAL_TYPES } from './operational.ts';
import { MESSAGE_TYPES } from './schemas.ts';

const endpoint = (types: string[] | null, eventTypes: string[] | null = null): EndpointFilter => ({
  webhookId: 'w',
  types: types && new Set(types),
  eventTypes: eventTypes && new Set(eventTypes),
});

describe('operational webhook types', () => {
  it('are opt-in: an endpoint without a types filter gets every other type, but not these', () => {
    const all = endpoint(null);
    for (const type of MESSAGE_TYPES) expect(matches(all, type, 'Custom')).toBe(!isOperational(type));
    expect(matches(all, 'webhook.test')).toBe(true);
  });

  it('go to an endpoint that names them, each only when named', () => {
    const disabledOnly = endpoint(['session.event', 'webhook.endpoint.disabled']);
    expect(matches(disabledOnly, 'webhook.endpoint.disabled')).toBe(true);
    expect(matches(disabledOnly, 'webhook.endpoint.recovered')).toBe(false);
    expect(matches(disabledOnly, 'reward.claimed')).toBe(false);
    const both = endpoint([...OPERATIONAL_TYPES]);
    for (const type of OPERATIONAL_TYPES) expect(matches(both, type)).toBe(true);
    expect(matches(both, 'session.event', 'Custom')).toBe(false);
  });

  it('ignore the eventTypes filter (it narrows session.event only)', () => {
    const narrowed = endpoint(['webhook.endpoint.recovered', 'session.event'], ['Error']);
    expect(matches(narrowed, 'webhook.endpoint.recovered')).toBe(true);
    expect(matches(narrowed, 'session.event', 'Custom')).toBe(false);
  });

  it('are accepted by the types filter of the API', () => {
    for (const type of OPERATIONAL_TYPES) expect(MESSAGE_TYPES).toContain(type);
    expect(isOperational('session.event')).toBe(false);
  });

  it('carry the contract fields', () => {
    const ref = { tenantId: 't', webhookId: 'w1', url: 'https://x.example/h' };
    expect(endpointDisabled(ref, 'failing', 1000)).toEqual({
      tenantId: 't',
      type: 'webhook.endpoint.disabled',
      data: { webhookId: 'w1', url: 'https://x.example/h', reason: 'failing', disabledAt: 1000 },
      occurredAt: 1000,
    });
    expect(endpointRecovered(ref, 400, 1000)).toEqual({
      tenantId: 't',
      type: 'webhook.endpoint.recovered',
      data: { webhookId: 'w1', url: 'https://x.example/h', failingSince: 400, recoveredAt: 1000 },
      occurredAt: 1000,
    });
  });
});
