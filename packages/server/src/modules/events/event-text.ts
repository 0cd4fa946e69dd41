/**
 * Where each event of an ingestion body's text begins and ends, so that an event can be stored as the
 * client wrote it instead of being serialized again (`JSON.stringify` of every event was the largest
 * item of the ingestion path after parsing). `text` must be the body `JSON.parse` already accepted and
 * validation found to be `{"events": [<object>, …]}`.
 *
 * Returns `[start0, end0, start1, end1, …]` (end exclusive), or null when the text is not in the one
 * shape whose events can be taken as they are: `events` given once, and every event compact — no
 * whitespace between its tokens (what `JSON.stringify` and every SDK write), so that stored bodies stay
 * single-line (NDJSON exports) and keep the `"key":value` form the alert evaluator reads.
 */
export function eventSpans(text: string): number[] | null {
  const spans: number[] = [];
  const n = text.length;
  let depth = 0;
  let arrays = 0;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = closingQuote(text, i);
      if (i < 0) return null;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (depth === 1) {
        // The value of a top-level key: the one `events` array (a repeated key would make two).
        if (c !== OPEN_ARRAY || ++arrays > 1) return null;
      } else if (depth === 2) {
        if (c !== OPEN_OBJECT) return null;
        spans.push(i);
      }
      depth++;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      depth--;
      if (depth === 2) spans.push(i + 1);
    } else if (depth >= 3 && (c === SPACE || c === TAB || c === LF || c === CR)) {
      return null;
    }
  }
  return depth === 0 && arrays === 1 ? spans : null;
}

const QUOTE = 34;
const BACKSLASH = 92;
const OPEN_OBJECT = 123;
const CLOSE_OBJECT = 125;
const OPEN_ARRAY = 91;
const CLOSE_ARRAY = 93;
const SPACE = 32;
const TAB = 9;
const LF = 10;
const CR = 13;

/** The index of the quote that closes the string opened at `open` (one preceded by an even run of backslashes). */
function closingQuote(text: string, open: number): number {
  let at = text.indexOf('"', open + 1);
  while (at > 0) {
    let backslashes = 0;
    for (let k = at - 1; text.charCodeAt(k) === BACKSLASH; k--) backslashes++;
    if ((backslashes & 1) === 0) return at;
    at = text.indexOf('"', at + 1);
  }
  return -1;
}
