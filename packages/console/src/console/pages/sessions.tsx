import { useState } from 'preact/hooks';
import { ago, Empty, ErrorAlert } from '../../shared/ui.tsx';
import { activeSessionsFeed, type Health, type Session, type SessionsQuery, useFeed } from '../live.ts';
import type { PageProps } from '../pages.tsx';
import { SessionDetail } from './session-detail.tsx';

/** `#/sessions`: the live sessions; `#/sessions/<sessionId>`: one session. */
export function SessionsPage({ api, path }: PageProps) {
  if (path[0]) return <SessionDetail api={api} sessionId={path[0]} />;
  return <LiveSessions api={api} />;
}

const WINDOWS = [
  { minutes: 5, label: '5 minutes' },
  { minutes: 15, label: '15 minutes' },
  { minutes: 60, label: '1 hour' },
  { minutes: 1440, label: '24 hours' },
];
const PAGE_SIZE = 50;

/** The filter survives a visit to a session's detail. */
let lastQuery: SessionsQuery = { cohort: '', minutes: 5, page: 1, pageSize: PAGE_SIZE };

function LiveSessions({ api }: Pick<PageProps, 'api'>) {
  const [query, setQueryState] = useState<SessionsQuery>(lastQuery);
  const [draft, setDraft] = useState(lastQuery.cohort);
  const setQuery = (q: SessionsQuery) => {
    lastQuery = q;
    setQueryState(q);
    setDraft(q.cohort);
  };
  const [cohorts, setCohorts] = useState<string[]>([]);
  const { data, error } = useFeed(() => activeSessionsFeed(api, query), [api, query]);

  // Cohorts seen so far feed the filter's suggestions.
  const seen = data?.sessions.map((s) => s.tenantCohortId).filter((c): c is string => !!c) ?? [];
  if (seen.some((c) => !cohorts.includes(c))) setCohorts([...new Set([...cohorts, ...seen])].sort());

  const span = WINDOWS.find((w) => w.minutes === query.minutes)?.label ?? `${query.minutes} minutes`;
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Sessions</h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Cohort
          <input
            type="search"
            list="cohort-options"
            placeholder="All cohorts"
            value={draft}
            spellcheck={false}
            // What is typed is kept as typed (a live update re-renders the page meanwhile); applied on change.
            onInput={(e) => setDraft((e.currentTarget as HTMLInputElement).value)}
            onChange={(e) =>
              setQuery({ ...query, cohort: (e.currentTarget as HTMLInputElement).value.trim(), page: 1 })
            }
          />
          <datalist id="cohort-options">
            {cohorts.map((c) => (
              <option key={c} value={c} />
            ))}
          </datalist>
        </label>
        <label>
          Active within
          <select
            value={String(query.minutes)}
            onChange={(e) =>
              setQuery({ ...query, minutes: Number((e.currentTarget as HTMLSelectElement).value), page: 1 })
            }
          >
            {WINDOWS.map((w) => (
              <option key={w.minutes} value={String(w.minutes)}>
                {w.label}
              </option>
            ))}
          </select>
        </label>
        {query.cohort ? (
          <>
            <button
              type="button"
              class="secondary"
              onClick={() => setQuery({ ...query, cohort: '', page: 1 })}
            >
              Show all cohorts
            </button>
            <a href={`#/cohort/${encodeURIComponent(query.cohort)}`}>Send a command to this cohort</a>
          </>
        ) : null}
      </form>
      <ErrorAlert error={error} />
      <p class="caption-note" aria-live="polite">
        {data
          ? `${data.totalCount}${data.totalCountExact ? '' : '+'} ${data.totalCount === 1 ? 'session' : 'sessions'} active within ${span}${
              query.cohort ? ` in cohort ${query.cohort}` : ''
            }; ${data.live ? 'updated live' : 'updated every 1.5 s'}.`
          : 'Loading…'}
      </p>
      <div class="table-wrap">
        <table class="sessions">
          <caption>Live sessions</caption>
          <thead>
            <tr>
              <th scope="col">Player</th>
              <th scope="col">Cohort</th>
              <th scope="col">Device</th>
              <th scope="col">Connected</th>
              <th scope="col">Stream</th>
              <th scope="col">Recording</th>
              <th scope="col">Battery</th>
              <th scope="col">FPS</th>
              <th scope="col">Last seen</th>
            </tr>
          </thead>
          <tbody>
            {data?.sessions.map((s) => (
              <SessionRow key={s.sessionId} session={s} health={data.health[s.sessionId]} now={data.at} />
            ))}
          </tbody>
        </table>
      </div>
      {data && data.sessions.length === 0 ? (
        <Empty
          title={
            query.cohort
              ? `No session of cohort “${query.cohort}” was active within ${span}.`
              : `No session was active within ${span}.`
          }
        >
          <p>
            A session appears here as soon as a headset starts one with the device SDK. To try it, run the
            headset simulator with this tenant's client:
          </p>
          <pre>
            <code>
              LIVELINE_CLIENT_ID=… LIVELINE_CLIENT_SECRET=… npm run liveline -- sim --devices 5
              {query.cohort ? ` --cohort ${query.cohort}` : ''}
            </code>
          </pre>
        </Empty>
      ) : null}
      {data && data.totalPages > 1 ? (
        <nav class="pager" aria-label="Pages of sessions">
          <button
            type="button"
            class="secondary"
            disabled={query.page <= 1}
            onClick={() => setQuery({ ...query, page: query.page - 1 })}
          >
            Previous page
          </button>
          <span>
            Page {data.page} of {data.totalPages}
          </span>
          <button
            type="button"
            class="secondary"
            disabled={query.page >= data.totalPages}
            onClick={() => setQuery({ ...query, page: query.page + 1 })}
          >
            Next page
          </button>
        </nav>
      ) : null}
    </section>
  );
}

function SessionRow({ session: s, health, now }: { session: Session; health?: Health; now: number }) {
  const open = () => {
    window.location.hash = `#/sessions/${s.sessionId}`;
  };
  const low = health?.batteryLevel != null && health.batteryLevel < 20;
  return (
    <tr class="clickable" onClick={open}>
      <th scope="row">
        <a href={`#/sessions/${s.sessionId}`} onClick={(e) => e.stopPropagation()}>
          {s.playerId}
        </a>
      </th>
      <td>{s.tenantCohortId ?? '—'}</td>
      <td>{s.device.model ?? '—'}</td>
      <td>
        <span class={s.connected ? 'badge ok' : 'badge off'}>{s.connected ? 'yes' : 'no'}</span>
      </td>
      <td>
        <span class={`badge state-${s.stream.state}`}>{s.stream.state}</span>
      </td>
      <td>
        <span class={`badge state-${s.recording.state}`}>{s.recording.state}</span>
      </td>
      <td class={low ? 'num warn' : 'num'}>
        {health?.batteryLevel != null ? `${health.batteryLevel} %` : '—'}
      </td>
      <td class="num">{health?.fps != null ? health.fps : '—'}</td>
      <td>{ago(s.lastSeenAt, now)}</td>
    </tr>
  );
}
