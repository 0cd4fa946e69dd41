import {
  ASPECT_RATIO_LABELS,
  type CameraControlName,
  CameraControls,
  cameraControlNames,
  RESOLUTION_LABELS,
} from '@liveline/protocol';
import { useEffect, useState } from 'preact/hooks';
import { asApiError, ok } from '../../shared/problem.ts';
import { ago, Empty, ErrorAlert, formatDateTime, formatTime } from '../../shared/ui.tsx';
import type { Api } from '../auth.ts';
import { HealthChart } from '../chart.tsx';
import {
  type Command,
  commandsFeed,
  type Session,
  type StoredEvent,
  sessionEventsFeed,
  sessionFeed,
  useFeed,
} from '../live.ts';
import { StreamFormatFields } from './stream-format.tsx';

/** Server-emitted events that report a change of the session's state. */
const STATE_EVENTS = new Set([
  'StreamStarted',
  'StreamStopped',
  'RecordingStarted',
  'RecordingStopped',
  'SessionEnd',
]);

/** `#/sessions/<id>`: one session, its events, health chart, controls and commands. */
export function SessionDetail({ api, sessionId }: { api: Api; sessionId: string }) {
  const session = useFeed(() => sessionFeed(api, sessionId), [api, sessionId]);
  const events = useFeed(() => sessionEventsFeed(api, sessionId), [api, sessionId]);
  const commands = useFeed(() => commandsFeed(api, sessionId), [api, sessionId]);

  // The state is read again at once when an event or a command says it changed.
  const lastStateEvent = events.data?.events.find((e) => STATE_EVENTS.has(e.eventType))?.id;
  const commandStatuses = commands.data?.map((c) => c.status).join(',');
  useEffect(() => session.feed.refresh(), [lastStateEvent, commandStatuses]);

  const changed = () => {
    session.feed.refresh();
    commands.feed.refresh();
  };

  const s = session.data;
  return (
    <section aria-labelledby="page-title" class="detail">
      <p>
        <a href="#/sessions">← Live sessions</a>
      </p>
      <h1 id="page-title">
        Session <code class="id">{sessionId}</code>
      </h1>
      {!s && session.error ? <ErrorAlert error={session.error} /> : null}
      {!s && !session.error ? <p aria-busy="true">Loading the session…</p> : null}
      {s ? (
        <div class="columns">
          <div>
            {session.error ? <ErrorAlert error={session.error} /> : null}
            <SessionFacts session={s} />
            <StreamControls api={api} session={s} onSent={changed} />
            <CommandForms api={api} session={s} onSent={changed} />
            <CommandsTable commands={commands.data} error={commands.error} />
          </div>
          <div>
            <section aria-labelledby="health-title">
              <h2 id="health-title">Health</h2>
              <HealthChart health={events.data?.health ?? []} />
            </section>
            <EventsRegion
              events={events.data?.events}
              truncated={events.data?.truncated}
              error={events.error}
            />
          </div>
        </div>
      ) : null}
    </section>
  );
}

function SessionFacts({ session: s }: { session: Session }) {
  const device = [s.device.model, s.device.os, s.device.appVersion && `app ${s.device.appVersion}`]
    .filter(Boolean)
    .join(' · ');
  const stream =
    s.stream.state === 'idle'
      ? 'idle'
      : `${s.stream.state}${s.stream.resolution != null ? ` · ${RESOLUTION_LABELS[s.stream.resolution as 0]}` : ''}${
          s.stream.aspectratio != null ? ` ${ASPECT_RATIO_LABELS[s.stream.aspectratio as 0]}` : ''
        }`;
  return (
    <dl class="facts">
      <dt>Player</dt>
      <dd>{s.playerId}</dd>
      <dt>Cohort</dt>
      <dd>{s.tenantCohortId ?? '—'}</dd>
      <dt>Device</dt>
      <dd>{device || '—'}</dd>
      <dt>Status</dt>
      <dd>
        <span class={`badge state-${s.status}`}>{s.status}</span>
        {s.endedAt ? ` at ${formatDateTime(s.endedAt)}${s.endReason ? ` (${s.endReason})` : ''}` : ''}
      </dd>
      <dt>Connected</dt>
      <dd>
        <span class={s.connected ? 'badge ok' : 'badge off'}>{s.connected ? 'yes' : 'no'}</span>
      </dd>
      <dt>Started</dt>
      <dd>{formatDateTime(s.startedAt)}</dd>
      <dt>Last seen</dt>
      <dd>{ago(s.lastSeenAt, Date.now())}</dd>
      <dt>Stream</dt>
      <dd>
        <span class={`badge state-${s.stream.state}`}>{stream}</span>
      </dd>
      <dt>Recording</dt>
      <dd>
        <span class={`badge state-${s.recording.state}`}>{s.recording.state}</span>
      </dd>
    </dl>
  );
}

/** Sends a command; the answer (or the problem's detail) is shown by the form. */
function useSender(onSent: () => void) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [status, setStatus] = useState('');
  const send = async (what: string, request: () => Promise<{ status: string }>) => {
    setBusy(true);
    setError(null);
    setStatus('');
    try {
      const answer = await request();
      setStatus(`${what}: ${answer.status}.`);
      onSent();
      return true;
    } catch (err) {
      setError(asApiError(err));
      return false;
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, status, send };
}

function Feedback({ error, status }: { error: unknown; status: string }) {
  return (
    <>
      <ErrorAlert error={error} />
      <p class="sent" role="status">
        {status}
      </p>
    </>
  );
}

/** Stream and recording buttons, enabled only where the state rules allow them (CONTRACT §3). */
function StreamControls({ api, session: s, onSent }: { api: Api; session: Session; onSent: () => void }) {
  const [resolution, setResolution] = useState(2);
  const [aspectratio, setAspectratio] = useState(0);
  const { busy, error, status, send } = useSender(onSent);
  const path = { params: { path: { SessionId: s.sessionId } }, body: {} };
  const live = s.status === 'live';
  const canStart = live && s.stream.state === 'idle';
  const canStop = live && s.stream.state === 'streaming';
  const canRecord = live && s.stream.state === 'streaming' && s.recording.state === 'idle';
  const canStopRecording = live && s.recording.state === 'recording';
  const why = !live
    ? 'The session has ended.'
    : s.stream.state === 'starting' || s.stream.state === 'stopping'
      ? `The stream is ${s.stream.state}: waiting for the headset.`
      : s.stream.state === 'idle'
        ? 'Recording needs a live stream.'
        : '';
  return (
    <section aria-labelledby="stream-title" class="panel">
      <h2 id="stream-title">Stream and recording</h2>
      <div class="row">
        <StreamFormatFields
          resolution={resolution}
          aspectratio={aspectratio}
          onResolution={setResolution}
          onAspectratio={setAspectratio}
          disabled={!canStart}
        />
      </div>
      <div class="row buttons">
        <button
          type="button"
          disabled={busy || !canStart}
          onClick={() =>
            send('Start stream', () =>
              ok(
                api.tenant.POST('/sessions/{SessionId}/realtime/commands/stream', {
                  params: path.params,
                  body: { resolution, aspectratio },
                }),
              ),
            )
          }
        >
          Start stream
        </button>
        <button
          type="button"
          disabled={busy || !canStop}
          onClick={() =>
            send('Stop stream', () =>
              ok(api.tenant.PUT('/sessions/{SessionId}/realtime/commands/stream/stop', path)),
            )
          }
        >
          Stop stream
        </button>
        <button
          type="button"
          disabled={busy || !canRecord}
          onClick={() =>
            send('Start recording', () =>
              ok(api.tenant.PUT('/sessions/{SessionId}/realtime/commands/record', path)),
            )
          }
        >
          Start recording
        </button>
        <button
          type="button"
          disabled={busy || !canStopRecording}
          onClick={() =>
            send('Stop recording', () =>
              ok(api.tenant.PUT('/sessions/{SessionId}/realtime/commands/record/stop', path)),
            )
          }
        >
          Stop recording
        </button>
      </div>
      {why ? <p class="hint">{why}</p> : null}
      {live && !s.connected ? (
        <p class="hint">The headset is not connected: commands wait for it to reconnect (30 s by default).</p>
      ) : null}
      <Feedback error={error} status={status} />
    </section>
  );
}

function CommandForms({ api, session, onSent }: { api: Api; session: Session; onSent: () => void }) {
  if (session.status !== 'live') {
    return (
      <section aria-labelledby="commands-title" class="panel">
        <h2 id="commands-title">Send a command</h2>
        <p class="hint">The session has ended: it takes no more commands.</p>
      </section>
    );
  }
  return (
    <section aria-labelledby="commands-title" class="panel">
      <h2 id="commands-title">Send a command</h2>
      <TextForm api={api} sessionId={session.sessionId} onSent={onSent} />
      <CameraForm api={api} sessionId={session.sessionId} onSent={onSent} />
      <CustomForm api={api} sessionId={session.sessionId} onSent={onSent} />
    </section>
  );
}

interface FormProps {
  api: Api;
  sessionId: string;
  onSent: () => void;
}

function postCommand(api: Api, sessionId: string, body: { name: string; data: unknown }) {
  return ok(
    api.tenant.POST('/sessions/{SessionId}/realtime/commands', {
      params: { path: { SessionId: sessionId } },
      body: body as never,
    }),
  );
}

function TextForm({ api, sessionId, onSent }: FormProps) {
  const [text, setText] = useState('');
  const { busy, error, status, send } = useSender(onSent);
  return (
    <form
      class="command-form"
      onSubmit={async (e) => {
        e.preventDefault();
        if (await send('Text', () => postCommand(api, sessionId, { name: 'text', data: text }))) setText('');
      }}
    >
      <label>
        Message
        <input
          value={text}
          maxLength={4096}
          required
          onInput={(e) => setText((e.currentTarget as HTMLInputElement).value)}
        />
      </label>
      <button type="submit" disabled={busy}>
        Send text
      </button>
      <Feedback error={error} status={status} />
    </form>
  );
}

const CONTROL_LABELS: Record<CameraControlName, string> = {
  fieldOfView: 'Field of view',
  smoothingAmount: 'Smoothing',
  cameraView: 'Camera view',
  lookType: 'Look type',
  followDistance: 'Follow distance',
  heightOffset: 'Height offset',
};

function CameraForm({ api, sessionId, onSent }: FormProps) {
  const [values, setValues] = useState<Partial<Record<CameraControlName, string>>>({});
  const { busy, error, status, send } = useSender(onSent);
  const controls = cameraControlNames
    .filter((name) => (values[name] ?? '') !== '')
    .map((name) => ({ name, value: String(values[name]) }));
  return (
    <form
      class="command-form"
      onSubmit={(e) => {
        e.preventDefault();
        void send('Camera', () => postCommand(api, sessionId, { name: 'camera', data: { controls } }));
      }}
    >
      <fieldset>
        <legend>Camera</legend>
        <div class="grid">
          {cameraControlNames.map((name) => {
            const spec = CameraControls[name] as {
              kind: string;
              min: number;
              max: number;
              values?: Record<string, number>;
            };
            const set = (v: string) => setValues({ ...values, [name]: v });
            return spec.values ? (
              <label key={name}>
                {CONTROL_LABELS[name]}
                <select
                  value={values[name] ?? ''}
                  onChange={(e) => set((e.currentTarget as HTMLSelectElement).value)}
                >
                  <option value="">unchanged</option>
                  {Object.entries(spec.values).map(([label, v]) => (
                    <option key={v} value={String(v)}>
                      {label}
                    </option>
                  ))}
                </select>
              </label>
            ) : (
              <label key={name}>
                {CONTROL_LABELS[name]} ({spec.min}–{spec.max})
                <input
                  type="number"
                  inputMode="decimal"
                  min={spec.min}
                  max={spec.max}
                  step="any"
                  placeholder="unchanged"
                  value={values[name] ?? ''}
                  onInput={(e) => set((e.currentTarget as HTMLInputElement).value)}
                />
              </label>
            );
          })}
        </div>
      </fieldset>
      <button type="submit" disabled={busy || controls.length === 0}>
        Send camera settings
      </button>
      <Feedback error={error} status={status} />
    </form>
  );
}

type VariableType = 'string' | 'bool' | 'int' | 'float';
interface Variable {
  key: number;
  name: string;
  type: VariableType;
  value: string;
}

let nextKey = 1;
const newVariable = (): Variable => ({ key: nextKey++, name: '', type: 'string', value: '' });

function CustomForm({ api, sessionId, onSent }: FormProps) {
  const [name, setName] = useState('');
  const [variables, setVariables] = useState<Variable[]>(() => [newVariable()]);
  const { busy, error, status, send } = useSender(onSent);
  const update = (key: number, change: Partial<Variable>) =>
    setVariables(variables.map((v) => (v.key === key ? { ...v, ...change } : v)));
  return (
    <form
      class="command-form"
      onSubmit={(e) => {
        e.preventDefault();
        const data = {
          names: variables.map((v) => v.name.trim()),
          types: variables.map((v) => v.type),
          values: variables.map((v) => v.value),
        };
        void send(`Command ${name}`, () => postCommand(api, sessionId, { name: name.trim(), data }));
      }}
    >
      <fieldset>
        <legend>Custom variables</legend>
        <label>
          Command name
          <input
            value={name}
            required
            maxLength={64}
            pattern="[A-Za-z0-9_.\-]+"
            spellcheck={false}
            onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)}
          />
        </label>
        {variables.map((v, i) => (
          <div class="variable" key={v.key}>
            <label>
              Variable {i + 1} name
              <input
                value={v.name}
                required
                maxLength={64}
                spellcheck={false}
                onInput={(e) => update(v.key, { name: (e.currentTarget as HTMLInputElement).value })}
              />
            </label>
            <label>
              Variable {i + 1} type
              <select
                value={v.type}
                onChange={(e) =>
                  update(v.key, { type: (e.currentTarget as HTMLSelectElement).value as VariableType })
                }
              >
                <option value="string">string</option>
                <option value="bool">bool</option>
                <option value="int">int</option>
                <option value="float">float</option>
              </select>
            </label>
            <label>
              Variable {i + 1} value
              <input
                value={v.value}
                placeholder={v.type === 'bool' ? 'true or false' : ''}
                onInput={(e) => update(v.key, { value: (e.currentTarget as HTMLInputElement).value })}
              />
            </label>
            <button
              type="button"
              class="secondary"
              disabled={variables.length === 1}
              onClick={() => setVariables(variables.filter((x) => x.key !== v.key))}
            >
              Remove variable {i + 1}
            </button>
          </div>
        ))}
        <button
          type="button"
          class="secondary"
          disabled={variables.length >= 256}
          onClick={() => setVariables([...variables, newVariable()])}
        >
          Add variable
        </button>
      </fieldset>
      <button type="submit" disabled={busy}>
        Send command
      </button>
      <Feedback error={error} status={status} />
    </form>
  );
}

function describeCommand(c: Command): string {
  const data = c.data as unknown;
  if (c.name === 'text' && typeof data === 'string') return data;
  if (c.name === 'camera' && data && typeof data === 'object' && 'controls' in data) {
    return (data.controls as { name: string; value: string }[]).map((x) => `${x.name}=${x.value}`).join(', ');
  }
  if (data && typeof data === 'object' && 'names' in data) {
    const d = data as { names: string[]; values: string[] };
    return d.names.map((n, i) => `${n}=${d.values[i]}`).join(', ');
  }
  if (data && typeof data === 'object' && 'resolution' in data) {
    const d = data as { resolution: 0; aspectratio: 0 };
    return `${RESOLUTION_LABELS[d.resolution] ?? d.resolution} ${ASPECT_RATIO_LABELS[d.aspectratio] ?? d.aspectratio}`;
  }
  return '';
}

function CommandsTable({ commands, error }: { commands: Command[] | undefined; error: unknown }) {
  return (
    <section class="panel" aria-labelledby="commands-table-title">
      <h2 id="commands-table-title">Commands</h2>
      {commands === undefined ? <ErrorAlert error={error} /> : null}
      <div class="table-wrap">
        <table>
          <caption class="visually-hidden">Commands</caption>
          <thead>
            <tr>
              <th scope="col">Command</th>
              <th scope="col">Status</th>
              <th scope="col">Issued</th>
              <th scope="col">Settled</th>
              <th scope="col">Details</th>
            </tr>
          </thead>
          <tbody>
            {commands?.map((c) => (
              <tr key={c.commandId}>
                <th scope="row">{c.name}</th>
                <td>
                  <span class={`badge status-${c.status}`}>{c.status}</span>
                </td>
                <td>{formatTime(c.issuedAt)}</td>
                <td>{formatTime(c.settledAt)}</td>
                <td class="details">
                  {describeCommand(c)}
                  {c.error ? <span class="error-text"> — {String(c.error)}</span> : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {commands && commands.length === 0 ? (
        <Empty title="No commands yet.">
          <p>Send one with the forms above: the headset's answer shows here.</p>
        </Empty>
      ) : null}
    </section>
  );
}

const HIDDEN_FIELDS = new Set(['id', 'eventType', 'timestamp', 'sessionId']);
const SEVERITY_CLASS: Record<string, string> = {
  Critical: 'sev-critical',
  Error: 'sev-error',
  Warning: 'sev-warning',
};

function EventsRegion({
  events,
  truncated,
  error,
}: {
  events: StoredEvent[] | undefined;
  truncated?: boolean;
  error: unknown;
}) {
  return (
    <section aria-labelledby="events-title" class="panel events">
      <h2 id="events-title">Events</h2>
      <ErrorAlert error={error} />
      {events === undefined && !error ? <p aria-busy="true">Loading events…</p> : null}
      {events && events.length === 0 ? (
        <Empty title="No events yet.">
          <p>Events appear here, newest first, as the headset sends them (the device SDK's track()).</p>
        </Empty>
      ) : null}
      <ol class="event-list">
        {events?.map((e) => (
          <EventItem key={e.id} event={e} />
        ))}
      </ol>
      {truncated ? <p class="hint">Only the newest 500 events are shown.</p> : null}
    </section>
  );
}

function EventItem({ event: e }: { event: StoredEvent }) {
  const severity = e.eventType === 'Error' && typeof e.severity === 'string' ? e.severity : null;
  const fields = Object.entries(e).filter(([k]) => !HIDDEN_FIELDS.has(k) && !(severity && k === 'message'));
  return (
    <li class={`event ${severity ? (SEVERITY_CLASS[severity] ?? 'sev-info') : ''}`}>
      <div class="event-head">
        <span class="event-type">{e.eventType}</span>
        {severity ? <span class="severity">{severity}</span> : null}
        <time dateTime={new Date(e.timestamp).toISOString()}>{formatTime(e.timestamp)}</time>
      </div>
      {severity && typeof e.message === 'string' ? <p class="event-message">{e.message}</p> : null}
      {fields.length > 0 ? (
        <dl class="event-fields">
          {fields.map(([k, v]) => (
            <div key={k}>
              <dt>{k}</dt>
              <dd>{typeof v === 'string' ? v : JSON.stringify(v)}</dd>
            </div>
          ))}
        </dl>
      ) : null}
    </li>
  );
}
