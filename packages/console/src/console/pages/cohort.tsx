import { useEffect, useState } from 'preact/hooks';
import { asApiError, ok } from '../../shared/problem.ts';
import { ErrorAlert } from '../../shared/ui.tsx';
import type { Api } from '../auth.ts';
import type { PageProps } from '../pages.tsx';
import { StreamFormatFields } from './stream-format.tsx';

/** The statuses a batch counts its commands by (CONTRACT §12), in the order they are shown. */
const STATUSES = ['queued', 'delivered', 'acknowledged', 'failed', 'expired', 'cancelled'] as const;
type Counts = Partial<Record<(typeof STATUSES)[number], number>>;

interface BatchAnswer {
  batchId: string;
  total: number;
  accepted: number;
  refused: number;
  sessions: (
    | { sessionId: string; commandId: string; status: string }
    | {
        sessionId: string;
        error: { code: string; detail: string };
      }
  )[];
}

interface BatchView {
  total: number;
  accepted: number;
  refused: number;
  counts: Counts;
}

interface Sent {
  what: string;
  cohort: string;
  answer: BatchAnswer;
}

const POLL_MS = 1000;
const POLL_FOR_MS = 120_000;

/**
 * The cohort routes, called through the tenant client (its token and refresh). Their types are not in
 * the generated client yet: the paths are spelled here and the answers typed by hand.
 */
type Untyped = {
  POST(path: string, init: object): Promise<{ data?: unknown; error?: unknown; response: Response }>;
  PUT(path: string, init: object): Promise<{ data?: unknown; error?: unknown; response: Response }>;
  GET(path: string, init: object): Promise<{ data?: unknown; error?: unknown; response: Response }>;
};
const untyped = (api: Api) => api.tenant as unknown as Untyped;

type Kind = 'text' | 'stream' | 'stream/stop' | 'record' | 'record/stop';

function sendToCohort(api: Api, cohort: string, kind: Kind, body: unknown): Promise<BatchAnswer> {
  const params = { path: { TenantCohortId: cohort } };
  const client = untyped(api);
  const request =
    kind === 'text'
      ? client.POST('/cohorts/{TenantCohortId}/realtime/commands', { params, body })
      : kind === 'stream'
        ? client.POST('/cohorts/{TenantCohortId}/realtime/commands/stream', { params, body })
        : client.PUT(`/cohorts/{TenantCohortId}/realtime/commands/${kind}`, { params, body: {} });
  return ok(request) as Promise<BatchAnswer>;
}

/** `#/cohort` (or `#/cohort/<cohort>`): one command to every live session of a cohort, and its batch. */
export function CohortPage({ api, path }: PageProps) {
  const [cohort, setCohort] = useState(path[0] ?? '');
  const [text, setText] = useState('');
  const [resolution, setResolution] = useState(2);
  const [aspectratio, setAspectratio] = useState(0);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [sent, setSent] = useState<Sent | null>(null);

  const send = async (what: string, kind: Kind, body: unknown) => {
    const target = cohort.trim();
    if (!target) {
      setError(new Error('Name the cohort first.'));
      return false;
    }
    setBusy(true);
    setError(null);
    try {
      const answer = await sendToCohort(api, target, kind, body);
      setSent({ what, cohort: target, answer });
      return true;
    } catch (err) {
      setError(asApiError(err));
      return false;
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Send to cohort</h1>
      <p class="hint">
        One command to every live session of a cohort at once. Each session gets its own command (listed in
        its Commands table); a session whose state refuses it (say, already streaming) is refused alone.
      </p>
      <form
        class="panel"
        aria-labelledby="cohort-form-title"
        onSubmit={async (e) => {
          e.preventDefault();
          if (await send('Text', 'text', { name: 'text', data: text })) setText('');
        }}
      >
        <h2 id="cohort-form-title">Command</h2>
        <label>
          Cohort ID
          <input
            value={cohort}
            required
            spellcheck={false}
            onInput={(e) => setCohort((e.currentTarget as HTMLInputElement).value)}
          />
        </label>
        <div class="row">
          <label>
            Message
            <input
              value={text}
              maxLength={4096}
              onInput={(e) => setText((e.currentTarget as HTMLInputElement).value)}
            />
          </label>
          <button type="submit" disabled={busy || text === ''}>
            Send text to cohort
          </button>
        </div>
        <div class="row">
          <StreamFormatFields
            resolution={resolution}
            aspectratio={aspectratio}
            onResolution={setResolution}
            onAspectratio={setAspectratio}
          />
        </div>
        <div class="row buttons">
          <button
            type="button"
            disabled={busy}
            onClick={() => send('Start stream', 'stream', { resolution, aspectratio })}
          >
            Start stream on cohort
          </button>
          <button type="button" disabled={busy} onClick={() => send('Stop stream', 'stream/stop', {})}>
            Stop stream on cohort
          </button>
          <button type="button" disabled={busy} onClick={() => send('Start recording', 'record', {})}>
            Start recording on cohort
          </button>
          <button type="button" disabled={busy} onClick={() => send('Stop recording', 'record/stop', {})}>
            Stop recording on cohort
          </button>
        </div>
        <ErrorAlert error={error} />
      </form>
      {sent ? <BatchProgress key={sent.answer.batchId} api={api} sent={sent} /> : null}
    </section>
  );
}

/** The batch's counts by status, read every second until every command has settled (or 2 minutes). */
function BatchProgress({ api, sent }: { api: Api; sent: Sent }) {
  const { answer, cohort, what } = sent;
  const [view, setView] = useState<BatchView | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState(false);

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const until = Date.now() + POLL_FOR_MS;
    const read = async () => {
      try {
        const batch = (await ok(
          untyped(api).GET('/cohorts/{TenantCohortId}/realtime/batches/{batchId}', {
            params: { path: { TenantCohortId: cohort, batchId: answer.batchId }, query: { limit: 1 } },
          }),
        )) as BatchView;
        if (stopped) return;
        setView(batch);
        setError(null);
        const open = (batch.counts.queued ?? 0) + (batch.counts.delivered ?? 0);
        if (open === 0 || Date.now() > until) {
          setDone(true);
          return;
        }
      } catch (err) {
        if (stopped) return;
        setError(asApiError(err));
      }
      timer = setTimeout(read, POLL_MS);
    };
    void read();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [api, cohort, answer.batchId]);

  const refusals = answer.sessions.flatMap((s) => ('error' in s ? [s] : []));
  return (
    <section class="panel" aria-labelledby="batch-title">
      <h2 id="batch-title">Batch</h2>
      <p role="status">
        {`${what} to cohort ${cohort}: ${answer.total} ${answer.total === 1 ? 'session' : 'sessions'}, ${answer.accepted} accepted, ${answer.refused} refused${
          answer.total === 0 ? ' (no live session in this cohort)' : ''
        }.${done ? ' Every command has settled.' : ''}`}
      </p>
      <p class="hint">Batch {answer.batchId}</p>
      <ErrorAlert error={error} />
      <div class="table-wrap">
        <table>
          <caption>Batch progress</caption>
          <thead>
            <tr>
              <th scope="col">Status</th>
              <th scope="col">Commands</th>
            </tr>
          </thead>
          <tbody>
            {STATUSES.filter((s) => s !== 'cancelled' || (view?.counts.cancelled ?? 0) > 0).map((s) => (
              <tr key={s}>
                <th scope="row">{s}</th>
                <td class="num">{view ? (view.counts[s] ?? 0) : '…'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {refusals.length > 0 ? (
        <div class="table-wrap">
          <table>
            <caption>Refused sessions</caption>
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">Code</th>
                <th scope="col">Reason</th>
              </tr>
            </thead>
            <tbody>
              {refusals.map((r) => (
                <tr key={r.sessionId}>
                  <th scope="row">
                    <a href={`#/sessions/${r.sessionId}`}>{r.sessionId}</a>
                  </th>
                  <td>
                    <code>{r.error.code}</code>
                  </td>
                  <td>{r.error.detail}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}
