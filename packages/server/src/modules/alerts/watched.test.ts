import { describe, expect, it } from 'vitest';
import { keyOf } from './field-value.ts';
import type { TenantRules, WatchedRule } from './rule-cache.ts';
import { meets, OPS } from './rules.ts';
import { mayMeet, observed, watchedEvents } from './watched.ts';

/** The summaries never rule out a condition some event meets (they may only say "scan"). */
describe('watchedEvents summaries', () => {
  const rule = (
    field: string,
    slot: number,
    op: (typeof OPS)[number],
    value: number | string,
  ): WatchedRule => ({
    alertId: `${field}-${op}-${value}`,
    tenantId: 't',
    name: 'r',
    eventType: field === 'severity' ? 'Error' : 'Health',
    field,
    op,
    value,
    tenantCohortId: null,
    forSeconds: 0,
    cooldownSeconds: 0,
    slot,
  });

  it('agrees with a scan of every event', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 48271) % 2147483647;
      return seed / 2147483647;
    };
    const severities = ['Critical', 'Error', 'Warning', 'Information', 'Debug'];
    for (let round = 0; round < 200; round++) {
      const rows = Array.from({ length: 1 + Math.floor(random() * 6) }, (_, i) => {
        const health = random() < 0.6;
        const fields: Record<string, unknown> = health
          ? random() < 0.8
            ? { fps: Math.round(random() * 100) }
            : {}
          : { severity: severities[Math.floor(random() * 5)], message: 'm' };
        const eventType = health ? 'Health' : 'Error';
        return {
          session_id: 's',
          event_id: `e${i}`,
          event_type: eventType,
          timestamp: i,
          body: JSON.stringify({ id: `e${i}`, eventType, timestamp: i, ...fields }),
          // Half the rounds as ingestion hands rows over (validated fields beside the JSON).
          ...(round % 2 === 0 ? { fields } : {}),
        };
      });
      const rules: WatchedRule[] = [];
      for (const op of OPS) rules.push(rule('fps', 0, op, Math.round(random() * 100)));
      for (const op of ['eq', 'neq'] as const)
        rules.push(rule('severity', 0, op, severities[Math.floor(random() * 5)]));
      const tenant: TenantRules = {
        active: new Set(),
        byId: new Map(rules.map((r) => [r.alertId, r])),
        byType: new Map([
          [
            'Health',
            { rules: rules.filter((r) => r.eventType === 'Health'), fields: ['fps'], keys: [keyOf('fps')] },
          ],
          [
            'Error',
            {
              rules: rules.filter((r) => r.eventType === 'Error'),
              fields: ['severity'],
              keys: [keyOf('severity')],
            },
          ],
        ]),
      };
      const group = { inserted: rows, sessions: new Map([['s', { tenantId: 't', tenantCohortId: null }]]) };
      const session = watchedEvents(group, new Map([['t', tenant]])).get('s');
      if (!session) continue;
      for (const r of session.rules) {
        const any = observed(session, r, keyOf(r.field)).some((e) => meets(r.op, r.value, e.value));
        if (any) expect(mayMeet(session, r), `${r.alertId} over ${JSON.stringify(rows)}`).toBe(true);
        if (typeof r.value === 'number' && r.op !== 'eq') expect(mayMeet(session, r)).toBe(any);
      }
    }
  });
});
