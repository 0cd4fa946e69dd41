import type { FanoutRow } from './store.ts';

/**
 * What a fan-out row (`webhook_fanout`, written by `outbox.ts`, expanded by `fanout.ts`) holds and
 * how its messages are cut out of it.
 *
 * A row holds the stored events' JSON texts back to back in `messages`, and in `layout` what each
 * message adds to its event: `{"c":[[receivedAt, tenantCohortId], …],"m":[[eventType, length, c], …]}`
 * — the context `c` an index into the row's few (receivedAt, cohort) pairs. The message
 * (`session.event`) is built from them at expansion: its head, the event's members, the cohort.
 * Rows written before this layout (a JSON array `[[eventType, length], …]`) hold each message
 * whole; they are read the same way, and `encodeFanout` keeps such messages whole.
 */

/** A message's context: the event's `receivedAt` (the message's `timestamp`) and its session's cohort. */
export type MessageContext = readonly [receivedAt: number, tenantCohortId: string | null];

/** One message of a fan-out row. */
export interface FanoutItem {
  eventType: string;
  /** The stored event's JSON object, or, with no context, the whole message. */
  text: string;
  context: MessageContext | null;
}

/** The body of a message before its data: `messageBody` is this, the data and `}`. */
export function messageHead(type: string, occurredAtIso: string): string {
  return `{"type":${JSON.stringify(type)},"timestamp":"${occurredAtIso}","data":`;
}

/** What comes before an event's text in its message, and what replaces its closing brace. */
function wrapping([receivedAt, cohort]: MessageContext): [head: string, tail: string] {
  return [
    messageHead('session.event', new Date(receivedAt).toISOString()),
    `,"tenantCohortId":${JSON.stringify(cohort)}}}`,
  ];
}

/**
 * A `session.event` message: its data is the stored event's JSON object with `tenantCohortId` added
 * (without a parse and a re-serialization: the member joins the text before its closing brace).
 */
const wrap = (eventText: string, [head, tail]: [string, string]) => `${head}${eventText.slice(0, -1)}${tail}`;

/** The message an item stands for, exactly as it is sent. */
export function messageOf(item: FanoutItem): string {
  return item.context === null ? item.text : wrap(item.text, wrapping(item.context));
}

type Layout = [eventType: string, length: number][] | { c: MessageContext[]; m: [string, number, number][] };

/** A row's items, in order. */
export function itemsOf(row: Pick<FanoutRow, 'messages' | 'layout'>): FanoutItem[] {
  const layout = JSON.parse(row.layout) as Layout;
  const [contexts, entries] = Array.isArray(layout) ? [[], layout] : [layout.c, layout.m];
  const out = new Array<FanoutItem>(entries.length);
  let at = 0;
  for (let i = 0; i < entries.length; i++) {
    const [eventType, length, c] = entries[i] as [string, number, number?];
    out[i] = { eventType, text: row.messages.slice(at, at + length), context: contexts[c ?? -1] ?? null };
    at += length;
  }
  if (at !== row.messages.length) throw new Error('webhook fan-out row: layout does not match its messages');
  return out;
}

/** A row's messages as `[eventType, message]`, each exactly as it is sent. */
export function messagesOf(row: Pick<FanoutRow, 'messages' | 'layout'>): [string, string][] {
  // Items of one context share its (parsed) tuple: its head and tail are made once.
  const wraps = new Map<MessageContext, [string, string]>();
  return itemsOf(row).map(({ eventType, text, context }) => {
    if (context === null) return [eventType, text];
    let parts = wraps.get(context);
    if (parts === undefined) {
      parts = wrapping(context);
      wraps.set(context, parts);
    }
    return [eventType, wrap(text, parts)];
  });
}

/** Builds a row's `messages` and `layout` one item at a time. */
export class FanoutWriter {
  private readonly texts: string[] = [];
  private readonly contexts: MessageContext[] = [];
  /** Context index by receivedAt, then cohort (a group's events share a few). */
  private readonly contextIndex = new Map<number, Map<string | null, number>>();
  private readonly entries: [string, number, number][] = [];
  /** Characters of `messages` so far. */
  chars = 0;

  get count() {
    return this.texts.length;
  }

  add(eventType: string, text: string, context: MessageContext | null) {
    this.texts.push(text);
    this.chars += text.length;
    this.entries.push([eventType, text.length, context === null ? -1 : this.contextOf(context)]);
  }

  private contextOf([receivedAt, cohort]: MessageContext): number {
    let byCohort = this.contextIndex.get(receivedAt);
    if (byCohort === undefined) {
      byCohort = new Map();
      this.contextIndex.set(receivedAt, byCohort);
    }
    let index = byCohort.get(cohort);
    if (index === undefined) {
      index = this.contexts.push([receivedAt, cohort]) - 1;
      byCohort.set(cohort, index);
    }
    return index;
  }

  /** The row's `messages` and `layout`. */
  finish(): Pick<FanoutRow, 'messages' | 'layout'> {
    return { messages: this.texts.join(''), layout: JSON.stringify({ c: this.contexts, m: this.entries }) };
  }
}

/** `messages` and `layout` of a row holding these items. */
export function encodeFanout(items: readonly FanoutItem[]): Pick<FanoutRow, 'messages' | 'layout'> {
  const writer = new FanoutWriter();
  for (const item of items) writer.add(item.eventType, item.text, item.context);
  return writer.finish();
}
