import { describe, expect, it } from 'vitest';
import {
  CLIENT_EVENT_TYPES,
  type ClientEventType,
  EventBatchSchema,
  EventSchema,
  MAX_EVENT_FUTURE_MS,
  MIN_EVENT_TIMESTAMP,
  SERVER_EVENT_TYPES,
} from './event-types.ts';
import { type BatchValidation, validateEventBatch } from './validation.ts';

const SID = '0190a3c2-7b7e-7c3e-8f00-0000000000aa';
const OTHER_SID = '0190a3c2-7b7e-7c3e-8f00-0000000000bb';
const STREAM_ID = '0190a3c2-7b7e-7c3e-8f00-0000000000cc';
const NOW = Date.UTC(2025, 5, 1, 12, 0, 0);
const CTX = { sessionId: SID, now: NOW, maxEvents: 1000 };

type Fields = Record<string, unknown>;

/** Every field of every client type, all valid. */
const FULL: Record<ClientEventType, Fields> = {
  Custom: {
    custom01: 'a',
    custom02: 'b',
    custom03: 'c',
    custom04: 'd',
    custom05: 'e',
    custom06: 'f',
    custom07: 'g',
    custom08: 'h',
    custom09: 'i',
    custom10: '',
  },
  Health: { fps: 72.5, cpuUsage: 43.2, batteryLevel: 88, memoryUsage: 1536.5, errorCount: 2 },
  Progression: {
    progressionStatus: 'Complete',
    progression01: 'world1',
    progression02: 'level3',
    progression03: 'boss',
    score: 1200,
  },
  Business: { amount: 499, currency: 'EUR', itemType: 'skin', itemId: 'golden_sword', cartType: 'shop' },
  Resource: { flowType: 'Source', currency: 'gems', amount: 12.5, itemType: 'reward', itemId: 'daily' },
  Design: { eventId: 'combat:weapon_1:Fire Rate-2:max', value: 3.5 },
  Error: { severity: 'Warning', message: 'texture cache full' },
  Impression: { adNetwork: 'admob', adType: 'rewarded', adPlacement: 'menu', adId: 'ad-77' },
  Screenshot: {
    imageUrl: 'https://cdn.example.com/s/1.jpg',
    imageId: 'img-1',
    width: 1920,
    height: 1080,
    streamingSessionId: STREAM_ID,
  },
  SessionEnd: { duration: 1234.5, reason: 'user' },
};

/** Only the required fields of every client type. */
const MINIMAL: Record<ClientEventType, Fields> = {
  Custom: {},
  Health: {},
  Progression: { progressionStatus: 'Start', progression01: 'w1' },
  Business: { amount: 100, currency: 'USD', itemType: 'coins', itemId: 'pack1' },
  Resource: { flowType: 'Sink', currency: 'gold', amount: 1, itemType: 'shop', itemId: 'potion' },
  Design: { eventId: 'a' },
  Error: { severity: 'Critical', message: 'x' },
  Impression: { adNetwork: 'unity' },
  Screenshot: { imageId: 'img-1' },
  SessionEnd: {},
};

let seq = 0;
/** An event of `eventType` with `fields`; a field set to `undefined` is removed. */
function event(eventType: string, fields: Fields = {}): Fields {
  const e: Fields = { id: `ev-${++seq}`, eventType, timestamp: NOW - 1000, ...fields };
  for (const k of Object.keys(e)) if (e[k] === undefined) delete e[k];
  return e;
}

function validate(events: unknown[], ctx = CTX): BatchValidation {
  return validateEventBatch({ events }, ctx);
}

function expectErrors(r: BatchValidation, code: 'validation_failed' | 'unknown_event_type') {
  if (r.ok) throw new Error(`expected failure, got ${r.events.length} valid events`);
  expect(r.code).toBe(code);
  return r.errors;
}

function expectOk(r: BatchValidation) {
  if (!r.ok) throw new Error(`expected success, got ${JSON.stringify(r.errors)}`);
  return r.events;
}

const long = (n: number) => 'x'.repeat(n);

describe('valid events', () => {
  it.each(CLIENT_EVENT_TYPES)('%s with all fields', (type) => {
    const e = event(type, { ...FULL[type], sessionId: SID });
    const [v] = expectOk(validate([e]));
    expect(v).toEqual({ id: e.id, eventType: type, timestamp: NOW - 1000, fields: FULL[type] });
  });

  it.each(CLIENT_EVENT_TYPES)('%s with only the required fields', (type) => {
    const [v] = expectOk(validate([event(type, MINIMAL[type])]));
    expect(v.fields).toEqual(MINIMAL[type]);
  });

  it.each<[string, string, Fields]>([
    ['id of 128 chars', 'Custom', { id: long(128) }],
    ['id of 1 char', 'Custom', { id: 'a' }],
    ['timestamp exactly 2000-01-01', 'Custom', { timestamp: MIN_EVENT_TIMESTAMP }],
    ['timestamp exactly 24 h ahead', 'Custom', { timestamp: NOW + MAX_EVENT_FUTURE_MS }],
    ['sessionId in upper case', 'Custom', { sessionId: SID.toUpperCase() }],
    ['strings of 1024 chars', 'Custom', { custom01: long(1024), custom10: long(1024) }],
    ['empty optional string', 'Custom', { custom03: '' }],
    ['cpuUsage and batteryLevel at 0', 'Health', { cpuUsage: 0, batteryLevel: 0, errorCount: 0, fps: 0 }],
    ['cpuUsage and batteryLevel at 100', 'Health', { cpuUsage: 100, batteryLevel: 100 }],
    ['progressionStatus Fail', 'Progression', { ...MINIMAL.Progression, progressionStatus: 'Fail' }],
    ['negative score', 'Progression', { ...MINIMAL.Progression, score: -5 }],
    ['negative Business amount (refund)', 'Business', { ...MINIMAL.Business, amount: -100 }],
    ['zero Business amount', 'Business', { ...MINIMAL.Business, amount: 0 }],
    ['fractional Resource amount', 'Resource', { ...MINIMAL.Resource, amount: 0.01 }],
    [
      'Design with 4 levels of 64 chars',
      'Design',
      { eventId: [long(64), long(64), long(64), long(64)].join(':') },
    ],
    ['Design level with space, dash, underscore', 'Design', { eventId: 'A b-c_9' }],
    ['Design negative value', 'Design', { eventId: 'a:b', value: -1.5 }],
    ['Error message of 8192 chars', 'Error', { severity: 'Debug', message: long(8192) }],
    ['Error severity Information', 'Error', { severity: 'Information', message: 'm' }],
    ['Error severity Error', 'Error', { severity: 'Error', message: 'm' }],
    ['Screenshot with imageId only', 'Screenshot', { imageId: 'abc' }],
    ['Screenshot with imageUrl only', 'Screenshot', { imageUrl: 'https://cdn.example.com/1.png' }],
    ['SessionEnd duration 0', 'SessionEnd', { duration: 0 }],
  ])('%s', (_name, type, fields) => {
    expectOk(validate([event(type, fields)]));
  });

  it('keeps fields as sent and never includes sessionId', () => {
    const [v] = expectOk(validate([event('Health', { sessionId: SID, fps: 60 })]));
    expect(v.fields).toEqual({ fps: 60 });
  });

  it('accepts duplicate ids inside one batch', () => {
    const events = expectOk(validate([event('Custom', { id: 'same' }), event('Health', { id: 'same' })]));
    expect(events.map((e) => e.id)).toEqual(['same', 'same']);
  });

  it('accepts exactly maxEvents events', () => {
    const events = Array.from({ length: 3 }, () => event('Custom'));
    expect(expectOk(validate(events, { ...CTX, maxEvents: 3 }))).toHaveLength(3);
  });

  it('validates 1000 valid mixed events', () => {
    const events = Array.from({ length: 1000 }, (_, i) => {
      const type = CLIENT_EVENT_TYPES[i % CLIENT_EVENT_TYPES.length];
      return event(type, i % 2 === 0 ? FULL[type] : { ...MINIMAL[type], sessionId: SID });
    });
    const valid = expectOk(validate(events));
    expect(valid).toHaveLength(1000);
    expect(valid[999].id).toBe(events[999].id);
    expect(valid[999].eventType).toBe(CLIENT_EVENT_TYPES[999 % CLIENT_EVENT_TYPES.length]);
  });
});

describe('per-type rules', () => {
  // [case, eventType, fields (merged over the type's full valid event; undefined removes), path, message?]
  const cases: [string, ClientEventType, Fields, string, RegExp?][] = [
    // Custom
    ['custom11 is unknown', 'Custom', { custom11: 'x' }, 'custom11', /not an allowed field/],
    ['custom01 is a number', 'Custom', { custom01: 1 }, 'custom01', /string/],
    ['custom05 too long', 'Custom', { custom05: long(1025) }, 'custom05', /1024/],
    ['custom10 is null', 'Custom', { custom10: null }, 'custom10'],
    // Health
    ['fps is text', 'Health', { fps: '60' }, 'fps', /number/],
    ['fps negative', 'Health', { fps: -1 }, 'fps'],
    ['cpuUsage above 100', 'Health', { cpuUsage: 100.5 }, 'cpuUsage', /<= 100/],
    ['cpuUsage below 0', 'Health', { cpuUsage: -0.1 }, 'cpuUsage', />= 0/],
    ['batteryLevel above 100', 'Health', { batteryLevel: 101 }, 'batteryLevel', /<= 100/],
    ['batteryLevel below 0', 'Health', { batteryLevel: -1 }, 'batteryLevel'],
    ['batteryLevel is text', 'Health', { batteryLevel: 'full' }, 'batteryLevel'],
    ['memoryUsage negative', 'Health', { memoryUsage: -1 }, 'memoryUsage'],
    ['errorCount not an integer', 'Health', { errorCount: 1.5 }, 'errorCount', /integer/],
    ['errorCount negative', 'Health', { errorCount: -1 }, 'errorCount'],
    ['Health unknown field', 'Health', { temperature: 40 }, 'temperature', /not an allowed field/],
    // Progression
    [
      'progressionStatus missing',
      'Progression',
      { progressionStatus: undefined },
      'progressionStatus',
      /required/,
    ],
    [
      'progressionStatus bad enum',
      'Progression',
      { progressionStatus: 'Done' },
      'progressionStatus',
      /"Start", "Fail", "Complete"/,
    ],
    ['progressionStatus wrong case', 'Progression', { progressionStatus: 'start' }, 'progressionStatus'],
    ['progression01 missing', 'Progression', { progression01: undefined }, 'progression01', /required/],
    ['progression01 empty', 'Progression', { progression01: '' }, 'progression01'],
    ['progression02 is a number', 'Progression', { progression02: 2 }, 'progression02', /string/],
    ['progression03 too long', 'Progression', { progression03: long(1025) }, 'progression03'],
    ['score not an integer', 'Progression', { score: 1.5 }, 'score', /integer/],
    ['score is text', 'Progression', { score: '10' }, 'score'],
    [
      'Progression unknown field',
      'Progression',
      { progression04: 'x' },
      'progression04',
      /not an allowed field/,
    ],
    // Business
    ['amount missing', 'Business', { amount: undefined }, 'amount', /required/],
    ['amount not an integer', 'Business', { amount: 4.99 }, 'amount', /integer/],
    ['amount is text', 'Business', { amount: '499' }, 'amount'],
    ['currency missing', 'Business', { currency: undefined }, 'currency', /required/],
    ['currency lower case', 'Business', { currency: 'eur' }, 'currency', /ISO 4217/],
    ['currency 4 letters', 'Business', { currency: 'EURO' }, 'currency', /ISO 4217/],
    ['currency is a number', 'Business', { currency: 978 }, 'currency'],
    ['itemType missing', 'Business', { itemType: undefined }, 'itemType', /required/],
    ['itemId missing', 'Business', { itemId: undefined }, 'itemId', /required/],
    ['itemId too long', 'Business', { itemId: long(1025) }, 'itemId'],
    ['cartType is a number', 'Business', { cartType: 1 }, 'cartType'],
    ['Business unknown field', 'Business', { price: 1 }, 'price', /not an allowed field/],
    // Resource
    ['flowType missing', 'Resource', { flowType: undefined }, 'flowType', /required/],
    ['flowType bad enum', 'Resource', { flowType: 'sink' }, 'flowType', /"Sink", "Source"/],
    ['Resource currency missing', 'Resource', { currency: undefined }, 'currency', /required/],
    ['Resource amount missing', 'Resource', { amount: undefined }, 'amount', /required/],
    ['Resource amount zero', 'Resource', { amount: 0 }, 'amount', /> 0/],
    ['Resource amount negative', 'Resource', { amount: -3 }, 'amount'],
    ['Resource amount is text', 'Resource', { amount: '3' }, 'amount'],
    ['Resource itemType missing', 'Resource', { itemType: undefined }, 'itemType', /required/],
    ['Resource itemId missing', 'Resource', { itemId: undefined }, 'itemId', /required/],
    ['Resource unknown field', 'Resource', { cartType: 'x' }, 'cartType', /not an allowed field/],
    // Design
    ['eventId missing', 'Design', { eventId: undefined }, 'eventId', /required/],
    ['eventId with 5 levels', 'Design', { eventId: 'a:b:c:d:e' }, 'eventId', /1 to 4 category levels/],
    ['eventId with empty level', 'Design', { eventId: 'a::b' }, 'eventId'],
    ['eventId trailing colon', 'Design', { eventId: 'a:' }, 'eventId'],
    ['eventId empty', 'Design', { eventId: '' }, 'eventId'],
    ['eventId level of 65 chars', 'Design', { eventId: `a:${long(65)}` }, 'eventId'],
    ['eventId bad character', 'Design', { eventId: 'a/b' }, 'eventId'],
    ['eventId is a number', 'Design', { eventId: 5 }, 'eventId'],
    ['value is text', 'Design', { value: '3' }, 'value', /number/],
    ['Design unknown field', 'Design', { category: 'x' }, 'category', /not an allowed field/],
    // Error
    ['severity missing', 'Error', { severity: undefined }, 'severity', /required/],
    [
      'severity bad enum',
      'Error',
      { severity: 'Fatal' },
      'severity',
      /"Critical", "Error", "Warning", "Information", "Debug"/,
    ],
    ['message missing', 'Error', { message: undefined }, 'message', /required/],
    ['message too long', 'Error', { message: long(8193) }, 'message', /8192/],
    ['message empty', 'Error', { message: '' }, 'message'],
    ['message is an object', 'Error', { message: { text: 'x' } }, 'message'],
    ['Error unknown field', 'Error', { stack: 'x' }, 'stack', /not an allowed field/],
    // Impression
    ['adNetwork missing', 'Impression', { adNetwork: undefined }, 'adNetwork', /required/],
    ['adNetwork is a number', 'Impression', { adNetwork: 1 }, 'adNetwork'],
    ['adType is a number', 'Impression', { adType: 1 }, 'adType'],
    ['adPlacement too long', 'Impression', { adPlacement: long(1025) }, 'adPlacement'],
    ['adId is boolean', 'Impression', { adId: true }, 'adId'],
    ['Impression unknown field', 'Impression', { revenue: 1 }, 'revenue', /not an allowed field/],
    // Screenshot
    ['imageUrl too long', 'Screenshot', { imageUrl: long(1025) }, 'imageUrl'],
    ['imageId is a number', 'Screenshot', { imageId: 1 }, 'imageId'],
    ['width zero', 'Screenshot', { width: 0 }, 'width'],
    ['width not an integer', 'Screenshot', { width: 10.5 }, 'width', /integer/],
    ['height is text', 'Screenshot', { height: '1080' }, 'height'],
    [
      'streamingSessionId not a UUID',
      'Screenshot',
      { streamingSessionId: 'abc' },
      'streamingSessionId',
      /UUID/,
    ],
    ['Screenshot unknown field', 'Screenshot', { format: 'png' }, 'format', /not an allowed field/],
    // SessionEnd
    ['duration negative', 'SessionEnd', { duration: -1 }, 'duration', />= 0/],
    ['duration is text', 'SessionEnd', { duration: '10' }, 'duration'],
    ['reason is a number', 'SessionEnd', { reason: 1 }, 'reason'],
    ['reason too long', 'SessionEnd', { reason: long(1025) }, 'reason'],
    ['SessionEnd unknown field', 'SessionEnd', { endedAt: 1 }, 'endedAt', /not an allowed field/],
  ];

  it('covers every client type', () => {
    expect(new Set(cases.map((c) => c[1]))).toEqual(new Set(CLIENT_EVENT_TYPES));
  });

  it.each(cases)('%s', (_name, type, fields, field, message) => {
    // The bad event sits at index 1, after a valid one.
    const errors = expectErrors(
      validate([event('Custom'), event(type, { ...FULL[type], ...fields })]),
      'validation_failed',
    );
    expect(errors).toHaveLength(1);
    expect(errors[0].path).toBe(`events[1].${field}`);
    if (message) expect(errors[0].message).toMatch(message);
  });
});

describe('a Screenshot names its image', () => {
  it('is refused without imageUrl and imageId, one error on the event naming both', () => {
    const errors = expectErrors(
      validate([event('Custom'), event('Screenshot', { width: 640, height: 480 })]),
      'validation_failed',
    );
    expect(errors).toEqual([{ path: 'events[1]', message: 'must have `imageUrl` or `imageId`' }]);
  });

  it('reports the missing image beside the event’s other problems', () => {
    const errors = expectErrors(
      validate([event('Screenshot', { width: 0, format: 'png' })]),
      'validation_failed',
    );
    expect(errors).toEqual(
      expect.arrayContaining([
        { path: 'events[0]', message: 'must have `imageUrl` or `imageId`' },
        { path: 'events[0].width', message: expect.any(String) },
        { path: 'events[0].format', message: 'is not an allowed field' },
      ]),
    );
    expect(errors).toHaveLength(3);
  });

  it('an empty imageUrl or imageId does not count', () => {
    const errors = expectErrors(validate([event('Screenshot', { imageUrl: '' })]), 'validation_failed');
    expect(errors.map((e) => e.path)).toEqual(['events[0].imageUrl']);
  });

  it('is accepted with either, or both', () => {
    for (const fields of [{ imageUrl: 'https://cdn.example.com/a.png' }, { imageId: 'i' }, FULL.Screenshot]) {
      expect(expectOk(validate([event('Screenshot', fields)]))[0].fields).toEqual(fields);
    }
  });

  it('says so in the published schema', () => {
    const screenshot = (
      EventSchema as unknown as { anyOf: { title?: string; anyOf?: unknown }[] }
    ).anyOf.find((s) => s.title === 'ScreenshotEvent');
    expect(screenshot?.anyOf).toEqual([
      { required: ['imageUrl'], properties: { imageUrl: {} } },
      { required: ['imageId'], properties: { imageId: {} } },
    ]);
  });
});

describe('common fields, for every type', () => {
  const cases: [string, Fields, string, RegExp?][] = [
    ['id missing', { id: undefined }, 'id', /required/],
    ['id empty', { id: '' }, 'id'],
    ['id of 129 chars', { id: long(129) }, 'id', /128/],
    ['id is a number', { id: 42 }, 'id', /string/],
    ['timestamp missing', { timestamp: undefined }, 'timestamp', /required/],
    ['timestamp is text', { timestamp: String(NOW) }, 'timestamp', /integer/],
    ['timestamp not an integer', { timestamp: NOW + 0.5 }, 'timestamp', /integer/],
    ['timestamp before 2000', { timestamp: MIN_EVENT_TIMESTAMP - 1 }, 'timestamp', /2000-01-01/],
    ['timestamp in seconds', { timestamp: Math.floor(NOW / 1000) }, 'timestamp', /2000-01-01/],
    ['timestamp more than 24 h ahead', { timestamp: NOW + MAX_EVENT_FUTURE_MS + 1 }, 'timestamp', /24 h/],
    ['sessionId of another session', { sessionId: OTHER_SID }, 'sessionId', /session id of the request path/],
    ['sessionId not a UUID', { sessionId: 'session-1' }, 'sessionId', /UUID/],
    ['sessionId is a number', { sessionId: 1 }, 'sessionId'],
    ['unknown field', { foo: 'bar' }, 'foo', /not an allowed field/],
  ];
  const matrix = CLIENT_EVENT_TYPES.flatMap((type) =>
    cases.map(
      ([name, fields, field, message]) => [`${type}: ${name}`, type, fields, field, message] as const,
    ),
  );

  it.each(matrix)('%s', (_name, type, fields, field, message) => {
    const errors = expectErrors(
      validate([event(type, { ...MINIMAL[type], ...fields }), event('Custom')]),
      'validation_failed',
    );
    expect(errors).toHaveLength(1);
    expect(errors[0].path).toBe(`events[0].${field}`);
    if (message) expect(errors[0].message).toMatch(message);
  });
});

describe('batch-level rules', () => {
  it.each<[string, unknown]>([
    ['null', null],
    ['an array', [event('Custom')]],
    ['a string', 'events'],
    ['a number', 1],
  ])('body that is %s', (_name, body) => {
    const errors = expectErrors(validateEventBatch(body, CTX), 'validation_failed');
    expect(errors).toEqual([{ path: '', message: expect.stringMatching(/object/) }]);
  });

  it('extra top-level field', () => {
    const errors = expectErrors(
      validateEventBatch({ events: [event('Custom')], sessionId: SID }, CTX),
      'validation_failed',
    );
    expect(errors).toEqual([{ path: 'sessionId', message: 'is not an allowed field' }]);
  });

  it('extra top-level field is reported together with event errors', () => {
    const body = { events: [event('Custom', { custom11: 'x' })], extra: 1 };
    const errors = expectErrors(validateEventBatch(body, CTX), 'validation_failed');
    expect(errors.map((e) => e.path)).toEqual(['extra', 'events[0].custom11']);
  });

  it('events missing', () => {
    const errors = expectErrors(validateEventBatch({}, CTX), 'validation_failed');
    expect(errors).toEqual([{ path: 'events', message: 'is required' }]);
  });

  it.each<[string, unknown]>([
    ['an object', { 0: event('Custom') }],
    ['a string', '[]'],
    ['null', null],
  ])('events is %s', (_name, events) => {
    const errors = expectErrors(validateEventBatch({ events }, CTX), 'validation_failed');
    expect(errors).toEqual([{ path: 'events', message: 'must be an array' }]);
  });

  it('empty events array', () => {
    const errors = expectErrors(validate([]), 'validation_failed');
    expect(errors).toEqual([{ path: 'events', message: expect.stringMatching(/at least 1/) }]);
  });

  it('too many events', () => {
    const events = Array.from({ length: 4 }, () => event('Custom'));
    const errors = expectErrors(validate(events, { ...CTX, maxEvents: 3 }), 'validation_failed');
    expect(errors).toEqual([{ path: 'events', message: 'must contain at most 3 events' }]);
  });

  it('1001 events with the default limit', () => {
    const events = Array.from({ length: 1001 }, () => event('Custom'));
    expect(expectErrors(validate(events), 'validation_failed')[0].path).toBe('events');
  });

  it.each<[string, unknown]>([
    ['null', null],
    ['a number', 5],
    ['a string', 'Custom'],
    ['an array', [event('Custom')]],
    ['a boolean', true],
  ])('event that is %s', (_name, item) => {
    const errors = expectErrors(validate([event('Custom'), event('Health'), item]), 'validation_failed');
    expect(errors).toEqual([{ path: 'events[2]', message: 'must be an object' }]);
  });

  it.each(SERVER_EVENT_TYPES)('server-only type %s is refused', (type) => {
    const errors = expectErrors(
      validate([event(type, { streamingSessionId: STREAM_ID })]),
      'validation_failed',
    );
    expect(errors).toHaveLength(1);
    expect(errors[0].path).toBe('events[0].eventType');
    expect(errors[0].message).toMatch(/server/);
  });

  it('unknown type gives unknown_event_type listing the allowed types', () => {
    const errors = expectErrors(
      validate([event('Custom'), event('Telemetry', { x: 1 })]),
      'unknown_event_type',
    );
    expect(errors).toHaveLength(1);
    expect(errors[0].path).toBe('events[1].eventType');
    for (const t of CLIENT_EVENT_TYPES) expect(errors[0].message).toContain(t);
    expect(errors[0].message).toContain('Telemetry');
  });

  it.each(['custom', 'HEALTH', '', 'constructor', '__proto__', 'toString'])(
    'eventType %j is unknown',
    (type) => {
      expect(expectErrors(validate([event(type)]), 'unknown_event_type')[0].path).toBe('events[0].eventType');
    },
  );

  it('a very long unknown type is shortened in the message', () => {
    const errors = expectErrors(validate([event(long(5000))]), 'unknown_event_type');
    expect(errors[0].message.length).toBeLessThan(300);
  });

  it('several unknown types only: unknown_event_type', () => {
    const errors = expectErrors(validate([event('A'), event('Custom'), event('B')]), 'unknown_event_type');
    expect(errors.map((e) => e.path)).toEqual(['events[0].eventType', 'events[2].eventType']);
  });

  it('unknown type plus another error: validation_failed with both', () => {
    const errors = expectErrors(validate([event('A'), event('Health', { fps: 'x' })]), 'validation_failed');
    expect(errors.map((e) => e.path)).toEqual(['events[0].eventType', 'events[1].fps']);
  });

  it('unknown type plus server-only type: validation_failed', () => {
    const errors = expectErrors(validate([event('A'), event('StreamStopped')]), 'validation_failed');
    expect(errors.map((e) => e.path)).toEqual(['events[0].eventType', 'events[1].eventType']);
  });

  it('unknown type with bad common fields: validation_failed, common fields checked', () => {
    const errors = expectErrors(
      validate([
        event('A', { id: undefined, timestamp: NOW + MAX_EVENT_FUTURE_MS + 1, sessionId: OTHER_SID }),
      ]),
      'validation_failed',
    );
    expect(errors.map((e) => e.path)).toEqual([
      'events[0].eventType',
      'events[0].id',
      'events[0].timestamp',
      'events[0].sessionId',
    ]);
  });

  it('eventType missing', () => {
    const errors = expectErrors(validate([event('Custom', { eventType: undefined })]), 'validation_failed');
    expect(errors).toEqual([{ path: 'events[0].eventType', message: 'is required' }]);
  });

  it('eventType not a string', () => {
    const errors = expectErrors(validate([event('Custom', { eventType: 3 })]), 'validation_failed');
    expect(errors).toHaveLength(1);
    expect(errors[0].path).toBe('events[0].eventType');
  });

  it('is all-or-nothing: one bad event rejects the batch', () => {
    const r = validate([
      event('Custom'),
      event('Health'),
      event('Custom', { timestamp: 1 }),
      event('Health'),
    ]);
    expect(r.ok).toBe(false);
    expect(expectErrors(r, 'validation_failed').map((e) => e.path)).toEqual(['events[2].timestamp']);
  });

  it('reports several errors of one event and of several events, in order', () => {
    const errors = expectErrors(
      validate([
        event('Business', { amount: 1.5, currency: 'x', itemType: undefined, itemId: 'i' }),
        event('Custom'),
        event('Error', { severity: 'Bad', message: 'm', sessionId: OTHER_SID }),
      ]),
      'validation_failed',
    );
    expect(errors.map((e) => e.path).sort()).toEqual(
      [
        'events[0].itemType',
        'events[0].amount',
        'events[0].currency',
        'events[2].severity',
        'events[2].sessionId',
      ].sort(),
    );
    expect(errors.findIndex((e) => e.path.startsWith('events[2]'))).toBe(3);
  });

  it('reports at most 50 errors', () => {
    const events = Array.from({ length: 200 }, () => event('Health', { fps: 'x', cpuUsage: 101 }));
    const errors = expectErrors(validate(events), 'validation_failed');
    expect(errors).toHaveLength(50);
    expect(errors[49].path).toBe('events[24].cpuUsage');
  });

  it('50 unknown types followed by another error: validation_failed', () => {
    const events: unknown[] = Array.from({ length: 60 }, () => event('Nope'));
    events.push(event('Custom', { custom11: 'x' }));
    const errors = expectErrors(validate(events), 'validation_failed');
    expect(errors).toHaveLength(50);
  });

  it('does not modify the input', () => {
    const e = event('Design', { ...FULL.Design, sessionId: SID });
    const copy = structuredClone(e);
    validate([e]);
    expect(e).toEqual(copy);
  });
});

describe('documentation schemas', () => {
  it('EventSchema is a union of every client type', () => {
    expect(EventSchema.anyOf).toHaveLength(CLIENT_EVENT_TYPES.length);
    const types = EventSchema.anyOf.map((s) => (s.properties.eventType as { const?: unknown }).const);
    expect(types).toEqual([...CLIENT_EVENT_TYPES]);
  });

  it('EventBatchSchema wraps an array of events', () => {
    const batch = EventBatchSchema as unknown as {
      additionalProperties: boolean;
      properties: { events: { type: string; minItems: number; maxItems: number; items: unknown } };
    };
    expect(batch.additionalProperties).toBe(false);
    expect(batch.properties.events).toMatchObject({ type: 'array', minItems: 1, maxItems: 1000 });
    expect(batch.properties.events.items).toBe(EventSchema);
  });
});
