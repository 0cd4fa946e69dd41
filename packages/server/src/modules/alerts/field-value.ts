/**
 * One field's value read from an event's stored JSON without parsing all of it: ingestion evaluates
 * every watched event, and most are read for nothing. The body is compact JSON (`JSON.stringify`, or
 * the client's own text without whitespace between tokens: events module, `eventSpans`) of a flat
 * object whose keys come from the event schemas, so `"<field>":` occurs only as that key (a quote
 * inside a string is escaped). Undefined when the event has no such field.
 */
export function fieldValue(body: string, key: string, from = 0): unknown {
  const at = body.indexOf(key, from);
  if (at < 0) return undefined;
  const start = at + key.length;
  if (body.charCodeAt(start) === 34) {
    let end = start + 1;
    while (end < body.length) {
      const c = body.charCodeAt(end);
      if (c === 92) end += 2;
      else if (c === 34) break;
      else end++;
    }
    return JSON.parse(body.slice(start, end + 1)) as string;
  }
  let end = start;
  while (end < body.length) {
    const c = body.charCodeAt(end);
    if (c === 44 || c === 125) break;
    end++;
  }
  const token = body.slice(start, end);
  if (token === 'null') return null;
  if (token === 'true') return true;
  if (token === 'false') return false;
  return Number(token);
}

/**
 * Where an event's own fields begin in its stored JSON: after the common ones the events module
 * writes first when it serializes an event (`id`, `sessionId`, `eventType`, `timestamp`), so that
 * `fieldValue` need not search them. An event stored as the client wrote it starts with `sessionId`
 * and keeps the client's order: its fields may be anywhere.
 */
export function fieldsStart(body: string): number {
  if (!body.startsWith('{"id":')) return 0;
  const at = body.indexOf('"timestamp":');
  return at < 0 ? 0 : at;
}

/** The key `fieldValue` looks for. */
export const keyOf = (field: string) => `"${field}":`;
