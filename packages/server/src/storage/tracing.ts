import type { LogEvent } from 'kysely';
import { activeTracer, failed, inSpan, tracerInSpan } from '../tracing.ts';
import type { DialectName, Storage } from './storage.ts';

/** `db.system.name` of the semantic conventions. */
const SYSTEM: Record<DialectName, string> = { sqlite: 'sqlite', postgres: 'postgresql' };

/** Longest statement text put on a span (the text has placeholders, never the parameters). */
const MAX_QUERY_TEXT = 2000;

const OPERATION = /^\s*(\w+)/;
const TABLE = /\b(?:from|into|update|join)\s+"?(\w+)"?/i;

/**
 * Kysely's query log as spans, one per SQL statement (BEGIN and COMMIT included) run inside a traced
 * span (tracing.ts `tracerInSpan`), when tracing is on as the store opens; undefined (no log, so Kysely times nothing) when it is off. Kysely calls the
 * log in the query's own async flow once it has answered, so the span is a child of whatever span
 * ran the query and starts `queryDurationMillis` before the log call.
 */
export function queryLog(dialect: DialectName): ((event: LogEvent) => void) | undefined {
  if (!activeTracer()) return undefined;
  return (event) => {
    const tracer = tracerInSpan();
    if (!tracer) return;
    const end = performance.timeOrigin + performance.now();
    const text = event.query.sql;
    const operation = (OPERATION.exec(text)?.[1] ?? 'query').toUpperCase();
    const table = TABLE.exec(text)?.[1];
    const span = tracer.startSpan(table ? `${operation} ${table}` : operation, {
      startTime: end - event.queryDurationMillis,
      attributes: {
        'db.system.name': SYSTEM[dialect],
        'db.operation.name': operation,
        ...(table ? { 'db.collection.name': table } : {}),
        'db.query.text': text.length > MAX_QUERY_TEXT ? text.slice(0, MAX_QUERY_TEXT) : text,
      },
    });
    if (event.level === 'error') failed(span, event.error);
    span.end(end);
  };
}

/**
 * `storage` with a span around each `atomically` transaction (the command log's group commit, whose
 * statements bypass Kysely on SQLite: one message to the writer thread), when tracing is on as the
 * store opens; `storage` itself when it is off.
 */
export function traceStorage(storage: Storage): Storage {
  if (!activeTracer()) return storage;
  const atomically = storage.atomically;
  return {
    ...storage,
    atomically: (statements, options) => {
      const tracer = tracerInSpan();
      if (!tracer) return atomically(statements, options);
      return inSpan(
        tracer,
        `${storage.dialect} transaction`,
        {
          attributes: {
            'db.system.name': SYSTEM[storage.dialect],
            'db.operation.name': 'TRANSACTION',
            'db.operation.batch.size': statements.length,
          },
        },
        () => atomically(statements, options),
      );
    },
  };
}
