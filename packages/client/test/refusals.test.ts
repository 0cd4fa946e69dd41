import { describe, expect, it } from 'vitest';
import { LivelineError } from '../src/index.ts';
import { refusedEvents } from '../src/refusals.ts';

function refusal(paths: string[], status = 400): LivelineError {
  return new LivelineError({
    status,
    code: 'validation_failed',
    detail: 'refused',
    errors: paths.map((path) => ({ path, message: `bad ${path}` })),
  });
}

describe('refusedEvents', () => {
  it('names only the events the errors point into, in batch order, with paths relative to them', () => {
    const refused = refusedEvents(
      refusal(['events[3].timestamp', 'events[1]', 'events[3].tags[0]', 'events[10].id']),
      11,
    );
    expect([...refused]).toEqual([
      [1, [{ path: '', message: 'bad events[1]' }]],
      [
        3,
        [
          { path: 'timestamp', message: 'bad events[3].timestamp' },
          { path: 'tags[0]', message: 'bad events[3].tags[0]' },
        ],
      ],
      [10, [{ path: 'id', message: 'bad events[10].id' }]],
    ]);
  });

  it('names the whole batch when an error is not about one event of it, or is not a 400', () => {
    for (const error of [
      refusal(['events[0].id', 'events']),
      refusal(['']),
      refusal([]),
      refusal(['events[3].id']),
      refusal(['events[0]x']),
      refusal(['extra']),
      refusal(['events[0].id'], 422),
      refusal(['events[0].id'], 404),
    ]) {
      expect([...refusedEvents(error, 3).keys()]).toEqual([0, 1, 2]);
    }
  });
});
