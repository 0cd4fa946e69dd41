/**
 * `#/alerts`: the tenant's alert rules (CONTRACT §13), a form to add one and `Delete`;
 * `#/alerts/<alertId>`: one rule and its incidents (one per session whose events met it), kept current.
 * The alert routes are not in the generated tenant client yet: called through it (its token and
 * refresh) with the paths spelled here and the answers typed by hand, as the cohort page does.
 */
import { CLIENT_EVENT_SCHEMAS, SERVER_EVENT_SCHEMAS } from '@liveline/protocol';
import { useState } from 'preact/hooks';
import { ok } from '../../shared/problem.ts';
import { Empty, ErrorAlert, formatDateTime } from '../../shared/ui.tsx';
import type { Api } from '../auth.ts';
import { POLL_MS, pollingFeed, useFeed } from '../live.ts';
import type { PageProps } from '../pages.tsx';
import { BackLink, ConfirmButton, Outcome, TableWrap, useAction } from './kit.tsx';

const OPS = [
  { op: 'lt', sign: '<' },
  { op: 'lte', sign: '≤' },
  { op: 'gt', sign: '>' },
  { op: 'gte', sign: '≥' },
  { op: 'eq', sign: '=' },
  { op: 'neq', sign: '≠' },
] as const;
type Op = (typeof OPS)[number]['op'];

interface Alert {
  alertId: string;
  name: string;
  eventType: string;
  field: string;
  op: Op;
  value: number | string;
  tenantCohortId: string | null;
  forSeconds: number;
  cooldownSeconds: number;
  createdAt: number;
  updatedAt: number;
}

interface Incident {
  incidentId: string;
  alertId: string;
  sessionId: string;
  playerId: string;
  tenantCohortId: string | null;
  status: 'open' | 'resolved';
  triggeredAt: number;
  triggeredEventId: string;
  notifications: number;
  lastNotifiedAt: number;
  resolvedAt: number | null;
  resolvedReason: 'condition_cleared' | 'session_ended' | null;
  resolvedEventId: string | null;
  createdAt: number;
}

interface AlertList {
  alerts: Alert[];
  totalCount: number;
}

interface IncidentList {
  incidents: Incident[];
  totalCount: number;
}

type Answer = Promise<{ data?: unknown; error?: unknown; response: Response }>;
type Untyped = {
  GET(path: string, init: object): Answer;
  POST(path: string, init: object): Answer;
  DELETE(path: string, init: object): Answer;
};
const untyped = (api: Api) => api.tenant as unknown as Untyped;

type JsonSchema = { type?: string; enum?: unknown[]; properties?: Record<string, JsonSchema> };
const COMMON = new Set(['id', 'eventType', 'timestamp', 'sessionId']);
/** The fields a rule may watch, by event type (the server checks; these only suggest). */
const FIELDS: Record<string, Record<string, JsonSchema>> = Object.fromEntries(
  Object.entries({ ...CLIENT_EVENT_SCHEMAS, ...SERVER_EVENT_SCHEMAS })
    .filter(([type]) => type !== 'SessionEnd')
    .map(([type, schema]) => [
      type,
      Object.fromEntries(
        Object.entries((schema as JsonSchema).properties ?? {}).filter(([name]) => !COMMON.has(name)),
      ),
    ]),
);
const EVENT_TYPES = Object.keys(FIELDS);

const signOf = (op: Op) => OPS.find((o) => o.op === op)?.sign ?? op;
export const conditionText = (a: Pick<Alert, 'eventType' | 'field' | 'op' | 'value'>) =>
  `${a.eventType} ${a.field} ${signOf(a.op)} ${typeof a.value === 'string' ? JSON.stringify(a.value) : a.value}`;

export function AlertsPage({ api, path }: PageProps) {
  if (path[0]) return <AlertDetail api={api} alertId={path[0]} />;
  return <AlertRules api={api} />;
}

function AlertRules({ api }: { api: Api }) {
  const { data, error, feed } = useFeed(
    () => pollingFeed(() => ok(untyped(api).GET('/alerts', {})) as Promise<AlertList>, 10_000),
    [api],
  );
  const removal = useAction();
  const remove = (a: Alert) =>
    removal.run(async () => {
      await ok(untyped(api).DELETE('/alerts/{alertId}', { params: { path: { alertId: a.alertId } } }));
      feed.refresh();
      return `Alert rule ${a.name} deleted.`;
    });
  return (
    <section aria-labelledby="page-title" class="manage">
      <h1 id="page-title">Alerts</h1>
      <p class="hint">
        A rule watches the events as they are stored. When a session's events meet its condition (for
        <em> For</em> seconds, if set), liveline opens an incident and sends the webhook{' '}
        <code>alert.triggered</code>; again after the cooldown while it stays open;{' '}
        <code>alert.resolved</code> when a later event no longer meets it or the session ends.
      </p>
      <ErrorAlert error={error} />
      <Outcome error={removal.error} status={removal.status} />
      {data === undefined && !error ? <p aria-busy="true">Loading alert rules…</p> : null}
      {data && data.alerts.length > 0 ? (
        <TableWrap labelledBy="alerts-caption">
          <table>
            <caption id="alerts-caption">Alert rules</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Condition</th>
                <th scope="col">Cohort</th>
                <th scope="col">For</th>
                <th scope="col">Cooldown</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {data.alerts.map((a) => (
                <tr key={a.alertId}>
                  <th scope="row" class="wrap">
                    <a href={`#/alerts/${a.alertId}`}>{a.name}</a>
                  </th>
                  <td>
                    <code>{conditionText(a)}</code>
                  </td>
                  <td>{a.tenantCohortId ?? 'every cohort'}</td>
                  <td class="num">{a.forSeconds} s</td>
                  <td class="num">{a.cooldownSeconds} s</td>
                  <td>{formatDateTime(a.createdAt)}</td>
                  <td>
                    <ConfirmButton
                      label="Delete"
                      confirmLabel={`Delete ${a.name}`}
                      question="Delete the rule and its incidents?"
                      disabled={removal.busy}
                      onConfirm={() => remove(a)}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      {data && data.alerts.length === 0 ? (
        <Empty title="No alert rules yet.">
          <p>
            Add one below, say <code>Health batteryLevel &lt; 15</code>, and a webhook endpoint for{' '}
            <code>alert.triggered</code> on the Webhooks page.
          </p>
        </Empty>
      ) : null}
      <CreateAlert api={api} onCreated={() => feed.refresh()} />
    </section>
  );
}

interface Draft {
  name: string;
  eventType: string;
  field: string;
  op: Op;
  value: string;
  cohort: string;
  forSeconds: string;
  cooldownSeconds: string;
}

const NEW_ALERT: Draft = {
  name: '',
  eventType: 'Health',
  field: 'batteryLevel',
  op: 'lt',
  value: '',
  cohort: '',
  forSeconds: '0',
  cooldownSeconds: '300',
};

/**
 * The value as the API takes it: a number for a numeric field (or an unknown one that reads as a
 * number), else the text. A wrong one is the API's 400, shown with its detail.
 */
function ruleValue(d: Draft): number | string {
  const schema = FIELDS[d.eventType]?.[d.field];
  const numeric = schema ? schema.type === 'number' || schema.type === 'integer' : true;
  const n = Number(d.value);
  return numeric && d.value.trim() !== '' && Number.isFinite(n) ? n : d.value;
}

/** An integer field's value; what is not one is sent as written, for the API to refuse. */
const seconds = (text: string) => (/^\s*-?\d+\s*$/.test(text) ? Number(text) : text);

function bodyOf(d: Draft) {
  return {
    name: d.name.trim(),
    eventType: d.eventType,
    field: d.field.trim(),
    op: d.op,
    value: ruleValue(d),
    ...(d.cohort.trim() ? { tenantCohortId: d.cohort.trim() } : {}),
    forSeconds: seconds(d.forSeconds),
    cooldownSeconds: seconds(d.cooldownSeconds),
  };
}

function CreateAlert({ api, onCreated }: { api: Api; onCreated: () => void }) {
  const [d, setD] = useState<Draft>(NEW_ALERT);
  const { busy, error, status, run } = useAction();
  const set = (patch: Partial<Draft>) => setD({ ...d, ...patch });
  const input = (e: Event) => (e.currentTarget as HTMLInputElement).value;
  const fields = Object.entries(FIELDS[d.eventType] ?? {});
  const enumValues = FIELDS[d.eventType]?.[d.field]?.enum;
  return (
    <section class="panel" aria-labelledby="new-alert-title">
      <h2 id="new-alert-title">New alert rule</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            const a = (await ok(untyped(api).POST('/alerts', { body: bodyOf(d) }))) as Alert;
            setD(NEW_ALERT);
            onCreated();
            return `Alert rule ${a.name} created: ${conditionText(a)}.`;
          });
        }}
      >
        <label>
          Alert name
          <input value={d.name} required maxLength={200} onInput={(e) => set({ name: input(e) })} />
        </label>
        <div class="row">
          <label>
            Event type
            <select
              value={d.eventType}
              onChange={(e) => {
                const eventType = (e.currentTarget as HTMLSelectElement).value;
                set({ eventType, field: Object.keys(FIELDS[eventType] ?? {})[0] ?? '' });
              }}
            >
              {EVENT_TYPES.map((t) => (
                <option key={t} value={t}>
                  {t}
                </option>
              ))}
            </select>
          </label>
          <label>
            Field
            <input
              value={d.field}
              required
              list="alert-fields"
              spellcheck={false}
              onInput={(e) => set({ field: input(e) })}
            />
            <datalist id="alert-fields">
              {fields.map(([name]) => (
                <option key={name} value={name} />
              ))}
            </datalist>
          </label>
          <label>
            Operator
            <select
              value={d.op}
              onChange={(e) => set({ op: (e.currentTarget as HTMLSelectElement).value as Op })}
            >
              {OPS.map((o) => (
                <option key={o.op} value={o.op}>
                  {`${o.sign} (${o.op})`}
                </option>
              ))}
            </select>
          </label>
          <label>
            Value
            <input
              value={d.value}
              required
              list={enumValues ? 'alert-values' : undefined}
              spellcheck={false}
              onInput={(e) => set({ value: input(e) })}
            />
            {enumValues ? (
              <datalist id="alert-values">
                {enumValues.map((v) => (
                  <option key={String(v)} value={String(v)} />
                ))}
              </datalist>
            ) : null}
          </label>
        </div>
        <div class="row">
          <label>
            Cohort (optional)
            <input
              value={d.cohort}
              spellcheck={false}
              placeholder="every cohort"
              onInput={(e) => set({ cohort: input(e) })}
            />
          </label>
          <label>
            For (seconds)
            <input value={d.forSeconds} inputMode="numeric" onInput={(e) => set({ forSeconds: input(e) })} />
          </label>
          <label>
            Cooldown (seconds)
            <input
              value={d.cooldownSeconds}
              inputMode="numeric"
              onInput={(e) => set({ cooldownSeconds: input(e) })}
            />
          </label>
        </div>
        <button type="submit" disabled={busy}>
          Create alert rule
        </button>
        <Outcome error={error} status={status} />
      </form>
    </section>
  );
}

// ---------------------------------------------------------------------------------------------
// One rule and its incidents

function AlertDetail({ api, alertId }: { api: Api; alertId: string }) {
  const params = { params: { path: { alertId } } };
  const rule = useFeed(
    () => pollingFeed(() => ok(untyped(api).GET('/alerts/{alertId}', params)) as Promise<Alert>, 10_000),
    [api, alertId],
  );
  const incidents = useFeed(
    () =>
      pollingFeed(
        () => ok(untyped(api).GET('/alerts/{alertId}/incidents', params)) as Promise<IncidentList>,
        POLL_MS,
      ),
    [api, alertId],
  );
  const removal = useAction();
  const a = rule.data;
  const list = incidents.data;
  return (
    <section aria-labelledby="page-title" class="detail manage">
      <BackLink href="#/alerts">Alerts</BackLink>
      <h1 id="page-title">{a ? a.name : 'Alert rule'}</h1>
      <ErrorAlert error={rule.error} />
      {a ? (
        <p>
          <code>{conditionText(a)}</code>
          {` · ${a.tenantCohortId ? `cohort ${a.tenantCohortId}` : 'every cohort'} · for ${a.forSeconds} s · cooldown ${a.cooldownSeconds} s`}
        </p>
      ) : null}
      {a ? (
        <p>
          <ConfirmButton
            label="Delete rule"
            confirmLabel={`Delete ${a.name}`}
            question="Delete the rule and its incidents?"
            disabled={removal.busy}
            onConfirm={() =>
              removal.run(async () => {
                await ok(untyped(api).DELETE('/alerts/{alertId}', params));
                location.hash = '#/alerts';
                return undefined;
              })
            }
          />
        </p>
      ) : null}
      <Outcome error={removal.error} status={removal.status} />
      <ErrorAlert error={incidents.error} />
      {list && list.incidents.length > 0 ? (
        <TableWrap labelledBy="incidents-caption">
          <table>
            <caption id="incidents-caption">Incidents</caption>
            <thead>
              <tr>
                <th scope="col">Status</th>
                <th scope="col">Session</th>
                <th scope="col">Player</th>
                <th scope="col">Cohort</th>
                <th scope="col">Triggered</th>
                <th scope="col">Notifications</th>
                <th scope="col">Resolved</th>
              </tr>
            </thead>
            <tbody>
              {list.incidents.map((i) => (
                <tr key={i.incidentId}>
                  <td>
                    <span class={i.status === 'open' ? 'badge status-failed' : 'badge ok'}>{i.status}</span>
                  </td>
                  <th scope="row" class="wrap">
                    <a href={`#/sessions/${i.sessionId}`}>{i.sessionId}</a>
                  </th>
                  <td>{i.playerId}</td>
                  <td>{i.tenantCohortId ?? '—'}</td>
                  <td>{formatDateTime(i.triggeredAt)}</td>
                  <td class="num">{i.notifications}</td>
                  <td>
                    {i.resolvedAt == null
                      ? '—'
                      : `${formatDateTime(i.resolvedAt)} (${i.resolvedReason === 'session_ended' ? 'session ended' : 'condition cleared'})`}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      {list && list.incidents.length === 0 ? (
        <Empty title="No incidents yet.">
          <p>An incident opens when a session's events meet the rule; this list follows within 2 s.</p>
        </Empty>
      ) : null}
    </section>
  );
}
