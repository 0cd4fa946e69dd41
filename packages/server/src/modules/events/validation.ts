/**
 * Validation of an event batch (CONTRACT §5) — pure, no I/O, on the ingestion hot path.
 *
 * One ajv validator per client event type is compiled at module load; each event is dispatched on its
 * `eventType` (no big `oneOf`). Checks that depend on the request (timestamp at most 24 h ahead of `now`,
 * `sessionId` equal to the path's) are done by hand after the schema check.
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { Type } from 'typebox';
import type { FieldError } from '../../http/problem.ts';
import { ajvErrorsToFieldErrors, bodyAjv } from '../../http/validation.ts';
import { eventSpans } from './event-text.ts';
import {
  CLIENT_EVENT_SCHEMAS,
  CLIENT_EVENT_TYPES,
  CustomEventSchema,
  MAX_EVENT_FUTURE_MS,
  MIN_EVENT_TIMESTAMP,
  SERVER_EVENT_TYPES,
} from './event-types.ts';

export interface ValidEvent {
  id: string;
  eventType: string;
  timestamp: number;
  /** type-specific fields as sent (without id/eventType/timestamp/sessionId) */
  fields: Record<string, unknown>;
  /**
   * The event's JSON exactly as the client wrote it, when the batch's text was given and the event
   * is compact and names no `sessionId` of its own (see `eventSpans`): stored with the session id
   * spliced in rather than serialized again.
   */
  text?: string;
}

export type BatchValidation =
  | { ok: true; events: ValidEvent[] }
  | { ok: false; errors: FieldError[]; code: 'validation_failed' | 'unknown_event_type' };

export interface BatchContext {
  /** The session of the request path; an event's own `sessionId`, if sent, must equal it. */
  sessionId: string;
  /** Server time, Unix ms. */
  now: number;
  /** Largest accepted batch (`config.maxEventsPerBatch`). */
  maxEvents: number;
}

const MAX_REPORTED_ERRORS = 50;

const VALIDATORS: ReadonlyMap<string, ValidateFunction> = new Map(
  CLIENT_EVENT_TYPES.map((t) => [t, bodyAjv.compile(CLIENT_EVENT_SCHEMAS[t] as object)]),
);
const SERVER_TYPES: ReadonlySet<string> = new Set(SERVER_EVENT_TYPES);

/** Common fields only, other fields allowed: used for events whose type is not a client type. */
const validateCommon = bodyAjv.compile(
  Type.Object({
    id: CustomEventSchema.properties.id,
    eventType: Type.String(),
    timestamp: CustomEventSchema.properties.timestamp,
    sessionId: CustomEventSchema.properties.sessionId,
  }) as object,
);

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const UNKNOWN_TYPE_SUFFIX = `is not a known event type; allowed: ${CLIENT_EVENT_TYPES.join(', ')}`;

const ANY_OF_REQUIRED = /^#\/anyOf\/\d+\/required$/;

/**
 * An `anyOf` of `required` branches (a `Screenshot` needs `imageUrl` or `imageId`): ajv reports each
 * missing field and then the `anyOf`; this makes them one error on the event that names every field.
 */
function mergeAnyOfRequired(errors: ErrorObject[]): ErrorObject[] {
  if (!errors.some((e) => e.keyword === 'required' && ANY_OF_REQUIRED.test(e.schemaPath))) return errors;
  const out: ErrorObject[] = [];
  let missing: string[] = [];
  for (const e of errors) {
    if (e.keyword === 'required' && ANY_OF_REQUIRED.test(e.schemaPath)) {
      missing.push((e.params as { missingProperty: string }).missingProperty);
    } else if (e.keyword === 'anyOf' && e.schemaPath === '#/anyOf' && missing.length > 0) {
      const fields = missing.map((f) => `\`${f}\``);
      const list = fields.length === 2 ? fields.join(' or ') : `one of ${fields.join(', ')}`;
      out.push({ ...e, keyword: 'anyOfRequired', message: `must have ${list}` });
      missing = [];
    } else {
      out.push(e);
    }
  }
  return out;
}

/** Rewrites ajv's generic wording where ours says more. Only runs on failures. */
function refineMessages(all: ErrorObject[]): ErrorObject[] {
  const errors = mergeAnyOfRequired(all);
  for (const e of errors) {
    if (e.keyword === 'minimum' && e.instancePath === '/timestamp') {
      e.message = `must not be before 2000-01-01T00:00:00Z (${MIN_EVENT_TIMESTAMP})`;
    } else if (e.keyword === 'pattern' && e.instancePath === '/currency') {
      e.message = 'must be an ISO 4217 currency code (3 uppercase letters)';
    } else if (e.keyword === 'pattern' && e.instancePath === '/eventId') {
      e.message = 'must be 1 to 4 category levels joined by ":", each 1-64 characters of [A-Za-z0-9_ -]';
    } else if (e.keyword === 'format' && (e.params as { format?: string }).format === 'uuid') {
      e.message = 'must be a UUID';
    }
  }
  return errors;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Collects errors up to the report limit and remembers which kinds occurred. */
class Errors {
  readonly list: FieldError[] = [];
  unknownType = false;
  other = false;

  add(path: string, message: string): void {
    this.other = true;
    if (this.list.length < MAX_REPORTED_ERRORS) this.list.push({ path, message });
  }

  addUnknownType(path: string, message: string): void {
    this.unknownType = true;
    if (this.list.length < MAX_REPORTED_ERRORS) this.list.push({ path, message });
  }

  addAjv(errors: ErrorObject[] | null | undefined, prefix: string): void {
    if (!errors || errors.length === 0) return;
    this.other = true;
    for (const fe of ajvErrorsToFieldErrors(refineMessages(errors), prefix)) {
      if (this.list.length >= MAX_REPORTED_ERRORS) return;
      this.list.push(fe);
    }
  }

  get any(): boolean {
    return this.unknownType || this.other;
  }

  /** Nothing more can change the outcome: the list is full and the code is settled. */
  get saturated(): boolean {
    return this.other && this.list.length >= MAX_REPORTED_ERRORS;
  }

  result(): BatchValidation {
    return {
      ok: false,
      errors: this.list,
      code: this.unknownType && !this.other ? 'unknown_event_type' : 'validation_failed',
    };
  }
}

/**
 * The checks a static schema cannot make. Values that are not well-typed are left to the schema's errors.
 */
function checkContextual(
  ev: Record<string, unknown>,
  index: number,
  ctx: BatchContext,
  maxTs: number,
  errs: Errors,
) {
  const ts = ev.timestamp;
  if (typeof ts === 'number' && ts > maxTs && Number.isInteger(ts)) {
    errs.add(`events[${index}].timestamp`, 'must not be more than 24 h ahead of the server clock');
  }
  const sid = ev.sessionId;
  if (
    typeof sid === 'string' &&
    sid !== ctx.sessionId &&
    UUID_RE.test(sid) &&
    sid.toLowerCase() !== ctx.sessionId.toLowerCase()
  ) {
    errs.add(`events[${index}].sessionId`, 'must equal the session id of the request path');
  }
}

function hasContextualProblem(ev: Record<string, unknown>, ctx: BatchContext, maxTs: number): boolean {
  const ts = ev.timestamp as number; // schema-valid: an integer
  if (ts > maxTs) return true;
  const sid = ev.sessionId;
  return (
    sid !== undefined &&
    sid !== ctx.sessionId &&
    (sid as string).toLowerCase() !== ctx.sessionId.toLowerCase()
  );
}

function fieldsOf(ev: Record<string, unknown>): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const key in ev) {
    if (key === 'id' || key === 'eventType' || key === 'timestamp' || key === 'sessionId') continue;
    fields[key] = ev[key];
  }
  return fields;
}

/**
 * Validates a whole ingestion body `{events: [...]}`. All-or-nothing: either every event is valid and
 * returned, or the (at most 50) problems are returned with paths like `events[3].timestamp`.
 */
export function validateEventBatch(body: unknown, ctx: BatchContext, text?: string): BatchValidation {
  const errs = new Errors();
  if (!isObject(body)) {
    errs.add('', 'must be an object with an "events" array');
    return errs.result();
  }
  for (const key in body) {
    if (key !== 'events') errs.add(key, 'is not an allowed field');
  }
  const events = body.events;
  if (events === undefined) {
    errs.add('events', 'is required');
    return errs.result();
  }
  if (!Array.isArray(events)) {
    errs.add('events', 'must be an array');
    return errs.result();
  }
  if (events.length === 0) {
    errs.add('events', 'must contain at least 1 event');
    return errs.result();
  }
  if (events.length > ctx.maxEvents) {
    errs.add('events', `must contain at most ${ctx.maxEvents} events`);
    return errs.result();
  }

  const maxTs = ctx.now + MAX_EVENT_FUTURE_MS;
  const valid: ValidEvent[] = [];
  for (let i = 0; i < events.length; i++) {
    const ev: unknown = events[i];
    if (!isObject(ev)) {
      errs.add(`events[${i}]`, 'must be an object');
    } else {
      const type = ev.eventType;
      const validate = typeof type === 'string' ? VALIDATORS.get(type) : undefined;
      if (validate !== undefined) {
        if (validate(ev) && !hasContextualProblem(ev, ctx, maxTs)) {
          if (!errs.any) {
            valid.push({
              id: ev.id as string,
              eventType: type as string,
              timestamp: ev.timestamp as number,
              fields: fieldsOf(ev),
            });
          }
        } else {
          errs.addAjv(validate.errors, `events[${i}]`);
          checkContextual(ev, i, ctx, maxTs, errs);
        }
      } else {
        // Not a client type: say so, and still check the common fields.
        if (typeof type === 'string') {
          if (SERVER_TYPES.has(type)) {
            errs.add(
              `events[${i}].eventType`,
              `"${type}" is emitted by the server only and cannot be sent by a client`,
            );
          } else {
            const shown = type.length > 64 ? `${type.slice(0, 64)}…` : type;
            errs.addUnknownType(`events[${i}].eventType`, `${JSON.stringify(shown)} ${UNKNOWN_TYPE_SUFFIX}`);
          }
        }
        if (!validateCommon(ev)) errs.addAjv(validateCommon.errors, `events[${i}]`);
        checkContextual(ev, i, ctx, maxTs, errs);
      }
    }
    if (errs.saturated) break;
  }
  if (errs.any) return errs.result();
  if (text !== undefined) attachTexts(valid, events, text);
  return { ok: true, events: valid };
}

/** Gives each valid event its text as sent, where `text` (the whole body) allows it. */
function attachTexts(valid: ValidEvent[], events: unknown[], text: string) {
  const spans = eventSpans(text);
  if (spans === null || spans.length !== 2 * valid.length) return;
  for (let i = 0; i < valid.length; i++) {
    if ((events[i] as Record<string, unknown>).sessionId === undefined) {
      valid[i].text = text.slice(spans[2 * i], spans[2 * i + 1]);
    }
  }
}
