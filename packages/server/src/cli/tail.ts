// Types only: the tenant client is loaded when `liveline tail` runs, not by every `liveline` command
// (`liveline start` among them).
import type { TailMessage, TailTarget, TenantClient } from '@liveline/tenant';
import type { Command } from 'commander';
import { serverUrl } from './admin-client.ts';
import { CliError } from './errors.ts';

type Env = Record<string, string | undefined>;

interface TailCliOptions {
  session?: string;
  cohort?: string;
  type: string[];
  url?: string;
  accessToken?: string;
  clientId?: string;
  clientSecret?: string;
  lastEventId?: string;
  json?: boolean;
  color?: boolean;
}

const collect = (value: string, previous: string[]) => [...previous, value];

/** `liveline tail`: a tenant's events and presence, live, one line each (CONTRACT §11). */
export function registerTail(program: Command) {
  program
    .command('tail')
    .description(
      "follow a tenant's events and presence changes live (a session, a cohort or every session): one line " +
        'each, coloured on a terminal; reconnects by itself without missing or repeating an event; Ctrl-C stops',
    )
    .option('--session <sessionId>', 'only this session')
    .option('--cohort <tenantCohortId>', 'only this cohort')
    .option(
      '--type <eventType>',
      'only this event type or presence kind (Health, Error, session.started, device.connected, …); repeatable',
      collect,
      [],
    )
    .option('--url <url>', 'server URL (default: $LIVELINE_URL, else http://127.0.0.1:$PORT, port 8080)')
    .option(
      '--access-token <token>',
      'a tenant access token with scope sessions:read (default: $LIVELINE_ACCESS_TOKEN)',
    )
    .option(
      '--client-id <id>',
      'tenant client id, used when no access token is given (default: $LIVELINE_CLIENT_ID)',
    )
    .option('--client-secret <secret>', 'its secret (default: $LIVELINE_CLIENT_SECRET)')
    .option(
      '--last-event-id <id>',
      'start after this event id (an id printed by --json): what was stored since comes first',
    )
    .option('--json', 'print each message as one line of JSON (NDJSON), as the tenant client yields it')
    .option('--no-color', 'no colours even on a terminal (also: NO_COLOR set)')
    .action(async (opts: TailCliOptions) => runTail(opts, process.env));
}

async function clientFor(url: string, opts: TailCliOptions, env: Env): Promise<TenantClient> {
  const { createTenantClient } = await import('@liveline/tenant');
  const accessToken = opts.accessToken ?? env.LIVELINE_ACCESS_TOKEN?.trim();
  if (accessToken) return createTenantClient({ baseUrl: url, accessToken });
  const clientId = opts.clientId ?? env.LIVELINE_CLIENT_ID?.trim();
  const clientSecret = opts.clientSecret ?? env.LIVELINE_CLIENT_SECRET?.trim();
  if (!clientId || !clientSecret) {
    throw new CliError(
      'no_credentials',
      'The tail needs a tenant: pass --access-token, or --client-id and --client-secret ' +
        '(or set LIVELINE_ACCESS_TOKEN, or LIVELINE_CLIENT_ID and LIVELINE_CLIENT_SECRET).',
    );
  }
  return createTenantClient({ baseUrl: url, credentials: { clientId, clientSecret } });
}

function reason(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause as NodeJS.ErrnoException | undefined;
  return cause?.code ?? cause?.message ?? err.message;
}

async function runTail(opts: TailCliOptions, env: Env): Promise<void> {
  if (opts.session && opts.cohort)
    throw new CliError('invalid_arguments', 'Give --session or --cohort, not both.');
  const url = serverUrl(opts.url, env);
  const client = await clientFor(url, opts, env);
  const { TailError, TokenError } = await import('@liveline/tenant');
  const target: TailTarget = opts.session
    ? { sessionId: opts.session }
    : opts.cohort
      ? { tenantCohortId: opts.cohort }
      : {};
  const what = opts.session
    ? `session ${opts.session}`
    : opts.cohort
      ? `cohort ${opts.cohort}`
      : 'every session';
  const colour = !opts.json && opts.color !== false && colourWanted(env);
  const note = (line: string) => process.stderr.write(`liveline tail: ${line}\n`);

  const controller = new AbortController();
  const stop = () => {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    controller.abort();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  let opened = false;
  try {
    const messages = client.tail(target, {
      eventTypes: opts.type,
      lastEventId: opts.lastEventId,
      signal: controller.signal,
      onOpen: () => {
        note(`${opened ? 'reconnected' : 'following'} ${what} on ${url} (Ctrl-C stops)`);
        opened = true;
      },
      onReconnect: ({ delayMs, error }) =>
        note(`connection lost (${reason(error)}); reconnecting in ${(delayMs / 1000).toFixed(1)} s`),
    });
    for await (const m of messages) {
      process.stdout.write(`${opts.json ? JSON.stringify(m) : formatMessage(m, colour)}\n`);
    }
  } catch (err) {
    if (err instanceof TailError)
      throw new CliError(err.code ?? `http_${err.status}`, err.problem.detail ?? err.message);
    if (err instanceof TokenError) throw new CliError(err.error, err.message);
    throw err;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

/** Colours on a terminal, unless NO_COLOR; FORCE_COLOR (not 0) forces them. */
function colourWanted(env: Env): boolean {
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0') return true;
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  return process.stdout.isTTY === true;
}

const ESC = '\u001b[';
const paint = (code: string, text: string, on: boolean) => (on ? `${ESC}${code}m${text}${ESC}0m` : text);
const DIM = '2';

/** The colour of a message's kind: presence by kind, Error events by severity, others by family. */
function colourOf(m: TailMessage): string {
  switch (m.kind) {
    case 'session.started':
      return '1;32';
    case 'session.ended':
      return '1;90';
    case 'device.connected':
      return '32';
    case 'device.disconnected':
      return '33';
    default:
      break;
  }
  if (m.eventType === 'Error') {
    const severity = m.event.severity;
    if (severity === 'Critical') return '1;97;41';
    if (severity === 'Error') return '1;31';
    if (severity === 'Warning') return '33';
    return '36';
  }
  if (m.eventType === 'Health') return '34';
  if (/^(Stream|Recording)/.test(m.eventType)) return '35';
  if (/^Session/.test(m.eventType)) return '1;90';
  return '36';
}

const SHOWN_ELSEWHERE = new Set(['id', 'eventType', 'sessionId', 'timestamp']);

/** `key=value` pairs: strings bare unless they hold spaces or quotes, objects as JSON. */
function compact(fields: [string, unknown][]): string {
  return fields
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => {
      const text = typeof v === 'string' ? (/^[^\s"=]+$/.test(v) ? v : JSON.stringify(v)) : JSON.stringify(v);
      return `${k}=${text}`;
    })
    .join(' ');
}

/** One line: time (UTC), kind or event type, sessionId, compact fields. */
export function formatMessage(m: TailMessage, colour: boolean): string {
  const at = m.kind === 'event' ? m.event.timestamp : m.data.at;
  const time = typeof at === 'number' ? new Date(at).toISOString().slice(11, 23) : '--:--:--.---';
  const label = (m.kind === 'event' ? m.eventType : m.kind).padEnd(19);
  const sessionId = m.kind === 'event' ? m.event.sessionId : m.data.sessionId;
  const rest =
    m.kind === 'event'
      ? compact([
          ...(m.eventType === 'Error' ? ([['severity', m.event.severity]] as [string, unknown][]) : []),
          ...Object.entries(m.event).filter(
            ([k]) => !SHOWN_ELSEWHERE.has(k) && !(m.eventType === 'Error' && k === 'severity'),
          ),
          ['id', m.event.id],
        ])
      : compact([
          ['player', m.data.playerId],
          ['cohort', m.data.tenantCohortId],
        ]);
  return `${paint(DIM, time, colour)}  ${paint(colourOf(m), label, colour)}  ${sessionId}  ${rest}`.trimEnd();
}
