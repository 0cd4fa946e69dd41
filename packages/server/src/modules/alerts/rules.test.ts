import { describe, expect, it } from 'vitest';
import { conditionErrors, evaluate, IDLE, type Observed, type RuleState } from './rules.ts';

const ev = (t: number, value: unknown): Observed => ({ id: `e${t}`, timestamp: t * 1000, value, body: {} });
let n = 0;
const ids = () => `i${++n}`;

function run(rule: Parameters<typeof evaluate>[1], events: Observed[], start: RuleState = IDLE) {
  return evaluate(start, rule, events, ids).transitions.map((t) => `${t.kind}@${t.event.timestamp / 1000}`);
}

describe('conditionErrors', () => {
  it.each([
    [{ eventType: 'Health', field: 'batteryLevel', op: 'lt', value: 15 }, null],
    [{ eventType: 'Error', field: 'severity', op: 'eq', value: 'Critical' }, null],
    [{ eventType: 'Custom', field: 'custom01', op: 'neq', value: 'x' }, null],
    [{ eventType: 'StreamStarted', field: 'resolution', op: 'gte', value: 2 }, null],
    [{ eventType: 'Error', field: 'batteryLevel', op: 'lt', value: 15 }, 'field'],
    [{ eventType: 'Nope', field: 'fps', op: 'lt', value: 15 }, 'eventType'],
    [{ eventType: 'SessionEnd', field: 'duration', op: 'lt', value: 15 }, 'eventType'],
    [{ eventType: 'Health', field: 'fps', op: 'lt', value: '15' }, 'value'],
    [{ eventType: 'Error', field: 'severity', op: 'lt', value: 'Critical' }, 'op'],
    [{ eventType: 'Error', field: 'severity', op: 'eq', value: 'Fatal' }, 'value'],
    [{ eventType: 'Error', field: 'message', op: 'eq', value: 3 }, 'value'],
  ] as const)('%j → %s', (condition, path) => {
    const errors = conditionErrors(condition);
    expect(errors[0]?.path ?? null).toBe(path);
  });

  it('names the allowed fields', () => {
    const [error] = conditionErrors({ eventType: 'Error', field: 'batteryLevel', op: 'lt', value: 15 });
    expect(error.message).toContain('severity, message');
  });
});

describe('evaluate', () => {
  const battery = { op: 'lt' as const, value: 15, forSeconds: 0, cooldownSeconds: 300 };
  const fps = { op: 'lt' as const, value: 45, forSeconds: 30, cooldownSeconds: 0 };

  it.each([
    [
      'triggers once while it holds, resolves when it no longer does',
      battery,
      [
        [0, 10],
        [1, 9],
        [2, 50],
      ],
      ['triggered@0', 'resolved@2'],
    ],
    ['a value of another type never meets it', battery, [[0, '10']], []],
    [
      'triggers again after a resolve',
      battery,
      [
        [0, 10],
        [1, 50],
        [2, 10],
      ],
      ['triggered@0', 'resolved@1', 'triggered@2'],
    ],
    [
      'notifies again once the cooldown ends',
      battery,
      [
        [0, 10],
        [299, 9],
        [300, 8],
        [301, 7],
      ],
      ['triggered@0', 'renotified@300'],
    ],
    [
      'for 30 s: triggers only at 31 s',
      fps,
      [
        [0, 30],
        [10, 30],
        [20, 30],
        [31, 30],
      ],
      ['triggered@31'],
    ],
    [
      'for 30 s: a non-matching event resets the run',
      fps,
      [
        [0, 30],
        [10, 60],
        [20, 30],
        [31, 30],
        [50, 30],
      ],
      ['triggered@50'],
    ],
    [
      'cooldown 0: never again while open',
      fps,
      [
        [0, 30],
        [30, 30],
        [10_000, 30],
      ],
      ['triggered@30'],
    ],
  ] as const)('%s', (_name, rule, points, expected) => {
    expect(
      run(
        rule,
        points.map(([t, v]) => ev(t, v)),
      ),
    ).toEqual(expected);
  });

  it('continues from a stored state', () => {
    const start: RuleState = { ...IDLE, pendingSince: 0, version: 3 };
    expect(run(fps, [ev(31, 10)], start)).toEqual(['triggered@31']);
    const open: RuleState = { ...IDLE, pendingSince: 0, incidentId: 'x', notifiedAt: 0, version: 4 };
    const { state, transitions } = evaluate(open, battery, [ev(5, 90)], ids);
    expect(transitions).toMatchObject([{ kind: 'resolved', incidentId: 'x' }]);
    expect(state).toMatchObject({ pendingSince: null, incidentId: null, notifiedAt: null });
  });
});
