/**
 * `#/webhooks`: the tenant's webhook endpoints (CONTRACT §6) and a form to add one (its signing secret
 * shown once); `#/webhooks/<webhookId>`: one endpoint — change, disable or enable, rotate its secret,
 * delete, send a test — and its delivery log with every attempt, retry and replay.
 */
import { CLIENT_EVENT_TYPES, SERVER_EVENT_TYPES } from '@liveline/protocol';
import type { components } from '@liveline/tenant';
import { useState } from 'preact/hooks';
import { ok } from '../../shared/problem.ts';
import { Empty, ErrorAlert, formatDateTime, formatTime } from '../../shared/ui.tsx';
import type { Api } from '../auth.ts';
import { POLL_MS, pollingFeed, useFeed } from '../live.ts';
import type { PageProps } from '../pages.tsx';
import {
  BackLink,
  ConfirmButton,
  fromLocalInput,
  OneTimeSecret,
  Outcome,
  TableWrap,
  toLocalInput,
  useAction,
} from './kit.tsx';

export type Webhook = components['schemas']['Webhook'];
export type Delivery = components['schemas']['WebhookDelivery'];
type DeliveryStatus = Delivery['status'];

const MESSAGE_TYPES = [
  { type: 'session.event', what: 'every stored event of a session' },
  { type: 'reward.claimed', what: 'a player claimed a reward' },
  { type: 'reward.verified', what: 'a claim was verified the first time' },
  { type: 'alert.triggered', what: 'a session met an alert rule (Alerts page)' },
  { type: 'alert.resolved', what: 'it no longer does, or the session ended' },
  { type: 'webhook.endpoint.disabled', what: 'another endpoint was disabled (only when ticked)' },
  {
    type: 'webhook.endpoint.recovered',
    what: 'an endpoint answers again after an outage (only when ticked)',
  },
] as const;
const EVENT_TYPES = [...CLIENT_EVENT_TYPES, ...SERVER_EVENT_TYPES];

export function WebhooksPage({ api, path }: PageProps) {
  if (path[0]) return <WebhookDetail api={api} webhookId={path[0]} />;
  return <WebhookList api={api} />;
}

function typesText(list: string[] | null): string {
  return list === null ? 'all' : list.join(', ');
}

function EnabledBadge({ w }: { w: Webhook }) {
  if (w.enabled) return <span class="badge ok">enabled</span>;
  return (
    <span class="badge status-failed">
      disabled
      {w.disabledReason === 'failing' ? ' (failing)' : w.disabledReason === 'manual' ? ' (by hand)' : ''}
    </span>
  );
}

function WebhookList({ api }: { api: Api }) {
  const { data, error, feed } = useFeed(
    () => pollingFeed(() => ok(api.tenant.GET('/webhooks')), 10_000),
    [api],
  );
  return (
    <section aria-labelledby="page-title" class="manage">
      <h1 id="page-title">Webhooks</h1>
      <ErrorAlert error={error} />
      {data === undefined && !error ? <p aria-busy="true">Loading webhook endpoints…</p> : null}
      {data && data.webhooks.length > 0 ? (
        <TableWrap labelledBy="webhooks-caption">
          <table>
            <caption id="webhooks-caption">Webhook endpoints</caption>
            <thead>
              <tr>
                <th scope="col">URL</th>
                <th scope="col">Description</th>
                <th scope="col">Messages</th>
                <th scope="col">Event types</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {data.webhooks.map((w) => (
                <tr key={w.webhookId}>
                  <th scope="row" class="wrap">
                    <a href={`#/webhooks/${w.webhookId}`}>{w.url}</a>
                  </th>
                  <td class="details">{w.description ?? '—'}</td>
                  <td class="details">{typesText(w.types)}</td>
                  <td class="details">{typesText(w.eventTypes)}</td>
                  <td>
                    <EnabledBadge w={w} />
                  </td>
                  <td>{formatDateTime(w.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      {data && data.webhooks.length === 0 ? (
        <Empty title="No webhook endpoints yet.">
          <p>
            Add one below: liveline then POSTs each stored event, claim and verification to it, signed as
            Standard Webhooks describes (verify them with <code>verifyWebhook</code> of{' '}
            <code>@liveline/tenant</code>).
          </p>
        </Empty>
      ) : null}
      <CreateWebhook api={api} onCreated={() => feed.refresh()} />
    </section>
  );
}

interface WebhookDraft {
  url: string;
  description: string;
  types: string[];
  eventTypes: string[];
}

function draftOf(w: Webhook): WebhookDraft {
  return {
    url: w.url,
    description: w.description ?? '',
    types: w.types ?? [],
    eventTypes: w.eventTypes ?? [],
  };
}

/** None ticked means every type: the API's null. */
function bodyOf(d: WebhookDraft) {
  return {
    url: d.url.trim(),
    description: d.description.trim() === '' ? null : d.description.trim(),
    types: d.types.length === 0 ? null : d.types,
    eventTypes: d.eventTypes.length === 0 ? null : d.eventTypes,
  } as {
    url: string;
    description: string | null;
    // The alert and operational types are not in the generated client yet; the server takes them.
    types: ('session.event' | 'reward.claimed' | 'reward.verified')[] | null;
    eventTypes: (typeof EVENT_TYPES)[number][] | null;
  };
}

function toggle(list: string[], value: string, on: boolean): string[] {
  return on ? [...list.filter((v) => v !== value), value] : list.filter((v) => v !== value);
}

function WebhookFields({ draft, onChange }: { draft: WebhookDraft; onChange: (d: WebhookDraft) => void }) {
  return (
    <>
      <label>
        Endpoint URL
        <input
          type="url"
          value={draft.url}
          required
          maxLength={2048}
          spellcheck={false}
          placeholder="https://example.com/liveline/webhooks"
          onInput={(e) => onChange({ ...draft, url: (e.currentTarget as HTMLInputElement).value })}
        />
      </label>
      <label>
        Description
        <input
          value={draft.description}
          maxLength={1000}
          onInput={(e) => onChange({ ...draft, description: (e.currentTarget as HTMLInputElement).value })}
        />
      </label>
      <fieldset>
        <legend>Message types</legend>
        <p class="hint">
          None ticked: every type, including types added later, except the operational ones
          (webhook.endpoint.*), which come only when ticked.
        </p>
        <div class="checks">
          {MESSAGE_TYPES.map((m) => (
            <label key={m.type} class="check">
              <input
                type="checkbox"
                checked={draft.types.includes(m.type)}
                onChange={(e) =>
                  onChange({
                    ...draft,
                    types: toggle(draft.types, m.type, (e.currentTarget as HTMLInputElement).checked),
                  })
                }
              />
              <span>
                {m.type} <span class="hint">({m.what})</span>
              </span>
            </label>
          ))}
        </div>
      </fieldset>
      <fieldset>
        <legend>Event types of session.event</legend>
        <p class="hint">None ticked: every event type.</p>
        <div class="checks">
          {EVENT_TYPES.map((t) => (
            <label key={t} class="check">
              <input
                type="checkbox"
                checked={draft.eventTypes.includes(t)}
                onChange={(e) =>
                  onChange({
                    ...draft,
                    eventTypes: toggle(draft.eventTypes, t, (e.currentTarget as HTMLInputElement).checked),
                  })
                }
              />
              <span>{t}</span>
            </label>
          ))}
        </div>
      </fieldset>
    </>
  );
}

const NEW_WEBHOOK: WebhookDraft = { url: '', description: '', types: [], eventTypes: [] };

function CreateWebhook({ api, onCreated }: { api: Api; onCreated: () => void }) {
  const [draft, setDraft] = useState<WebhookDraft>(NEW_WEBHOOK);
  const [created, setCreated] = useState<{ webhookId: string; secret: string } | null>(null);
  const { busy, error, status, run } = useAction();
  return (
    <section class="panel" aria-labelledby="new-webhook-title">
      <h2 id="new-webhook-title">New endpoint</h2>
      {created ? (
        <OneTimeSecret label="Signing secret" value={created.secret} onDone={() => setCreated(null)}>
          <p class="hint">
            Your receiver checks each message's <code>webhook-signature</code> with it.{' '}
            <a href={`#/webhooks/${created.webhookId}`}>Open the endpoint</a> to send a test message.
          </p>
        </OneTimeSecret>
      ) : null}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            const w = await ok(api.tenant.POST('/webhooks', { body: bodyOf(draft) }));
            setCreated({ webhookId: w.webhookId, secret: w.secret });
            setDraft(NEW_WEBHOOK);
            onCreated();
            return `Endpoint ${w.url} created.`;
          });
        }}
      >
        <WebhookFields draft={draft} onChange={setDraft} />
        <button type="submit" disabled={busy}>
          Create endpoint
        </button>
        <Outcome error={error} status={status} />
      </form>
    </section>
  );
}

// ---------------------------------------------------------------------------------------------
// One endpoint

function WebhookDetail({ api, webhookId }: { api: Api; webhookId: string }) {
  const {
    data: w,
    error,
    feed,
  } = useFeed(
    () =>
      pollingFeed(
        () => ok(api.tenant.GET('/webhooks/{webhookId}', { params: { path: { webhookId } } })),
        5000,
      ),
    [api, webhookId],
  );
  const [logStatus, setLogStatus] = useState<DeliveryStatus | ''>('');
  const [limit, setLimit] = useState(100);
  const log = useFeed(
    () =>
      pollingFeed(() =>
        ok(
          api.tenant.GET('/webhooks/{webhookId}/deliveries', {
            params: { path: { webhookId }, query: { limit, ...(logStatus ? { status: logStatus } : {}) } },
          }),
        ),
      ),
    [api, webhookId, logStatus, limit],
  );
  const changed = () => {
    feed.refresh();
    log.feed.refresh();
  };
  return (
    <section aria-labelledby="page-title" class="detail manage">
      <BackLink href="#/webhooks">Webhooks</BackLink>
      <h1 id="page-title">Endpoint {w ? <code class="id">{w.url}</code> : null}</h1>
      <ErrorAlert error={error} />
      {!w && !error ? <p aria-busy="true">Loading the endpoint…</p> : null}
      {w ? (
        <>
          <div class="columns">
            <div>
              <WebhookFacts w={w} />
              <EditWebhook api={api} w={w} onSaved={changed} />
            </div>
            <div>
              <WebhookActions api={api} w={w} onChanged={changed} />
              <Replay api={api} w={w} onReplayed={changed} />
            </div>
          </div>
          <section class="panel" aria-labelledby="deliveries-title">
            <h2 id="deliveries-title">Delivery log</h2>
            <form class="filters" onSubmit={(e) => e.preventDefault()}>
              <label>
                Show
                <select
                  value={logStatus}
                  onChange={(e) =>
                    setLogStatus((e.currentTarget as HTMLSelectElement).value as DeliveryStatus | '')
                  }
                >
                  <option value="">every delivery</option>
                  <option value="pending">pending</option>
                  <option value="delivered">delivered</option>
                  <option value="failed">failed</option>
                </select>
              </label>
            </form>
            <p class="caption-note">Newest first; updated every {POLL_MS / 1000} s.</p>
            {log.data === undefined ? <ErrorAlert error={log.error} /> : null}
            <DeliveriesTable api={api} w={w} deliveries={log.data?.deliveries} onChanged={changed} />
            {log.data && log.data.deliveries.length === 0 ? (
              <Empty title={logStatus ? `No ${logStatus} deliveries.` : 'No deliveries yet.'}>
                <p>
                  Press <strong>Send test</strong> above to send a <code>webhook.test</code> message now;
                  events, claims and verifications are delivered here as they happen.
                </p>
              </Empty>
            ) : null}
            {log.data?.hasMore && limit < 1000 ? (
              <button type="button" class="secondary" onClick={() => setLimit(Math.min(1000, limit + 100))}>
                Show older deliveries
              </button>
            ) : null}
          </section>
        </>
      ) : null}
    </section>
  );
}

function WebhookFacts({ w }: { w: Webhook }) {
  return (
    <dl class="facts">
      <dt>Webhook ID</dt>
      <dd>
        <code class="id">{w.webhookId}</code>
      </dd>
      <dt>URL</dt>
      <dd class="wrap">{w.url}</dd>
      <dt>Description</dt>
      <dd>{w.description ?? '—'}</dd>
      <dt>Messages</dt>
      <dd>{typesText(w.types)}</dd>
      <dt>Event types</dt>
      <dd class="wrap">{typesText(w.eventTypes)}</dd>
      <dt>Status</dt>
      <dd>
        <EnabledBadge w={w} />
      </dd>
      <dt>Created</dt>
      <dd>{formatDateTime(w.createdAt)}</dd>
      <dt>Changed</dt>
      <dd>{formatDateTime(w.updatedAt)}</dd>
    </dl>
  );
}

function EditWebhook({ api, w, onSaved }: { api: Api; w: Webhook; onSaved: () => void }) {
  const [draft, setDraft] = useState<WebhookDraft | null>(null);
  const { busy, error, status, run } = useAction();
  return (
    <section class="panel" aria-labelledby="edit-webhook-title">
      <h2 id="edit-webhook-title">Settings</h2>
      {draft === null ? (
        <button type="button" class="secondary" onClick={() => setDraft(draftOf(w))}>
          Edit endpoint
        </button>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              await ok(
                api.tenant.PATCH('/webhooks/{webhookId}', {
                  params: { path: { webhookId: w.webhookId } },
                  body: bodyOf(draft),
                }),
              );
              setDraft(null);
              onSaved();
              return 'Endpoint saved.';
            });
          }}
        >
          <WebhookFields draft={draft} onChange={setDraft} />
          <div class="row buttons">
            <button type="submit" disabled={busy}>
              Save endpoint
            </button>
            <button type="button" class="secondary" onClick={() => setDraft(null)}>
              Cancel
            </button>
          </div>
        </form>
      )}
      <Outcome error={error} status={status} />
    </section>
  );
}

function WebhookActions({ api, w, onChanged }: { api: Api; w: Webhook; onChanged: () => void }) {
  const { busy, error, status, run } = useAction();
  const [secret, setSecret] = useState<{ value: string; previousUntil: number } | null>(null);
  const path = { params: { path: { webhookId: w.webhookId } } };
  return (
    <section class="panel" aria-labelledby="webhook-actions-title">
      <h2 id="webhook-actions-title">Actions</h2>
      {secret ? (
        <OneTimeSecret label="New signing secret" value={secret.value} onDone={() => setSecret(null)}>
          <p class="hint">
            Until {formatDateTime(secret.previousUntil)} every message carries a second signature made with
            the old secret, so your receiver can switch over.
          </p>
        </OneTimeSecret>
      ) : null}
      <div class="row buttons">
        <button
          type="button"
          disabled={busy || !w.enabled}
          onClick={() =>
            run(async () => {
              const d = await ok(api.tenant.POST('/webhooks/{webhookId}/test', { ...path, body: {} }));
              onChanged();
              return `Test message queued (delivery ${d.deliveryId}): its attempts show in the delivery log.`;
            })
          }
        >
          Send test
        </button>
        <button
          type="button"
          class="secondary"
          disabled={busy}
          onClick={() =>
            run(async () => {
              await ok(api.tenant.PATCH('/webhooks/{webhookId}', { ...path, body: { enabled: !w.enabled } }));
              onChanged();
              return w.enabled
                ? 'Endpoint disabled: nothing is queued for it until it is enabled again.'
                : 'Endpoint enabled. Replay sends again what it missed.';
            })
          }
        >
          {w.enabled ? 'Disable endpoint' : 'Enable endpoint'}
        </button>
        <ConfirmButton
          label="Rotate secret"
          confirmLabel="Rotate now"
          question="Make a new signing secret? The old one signs along for 24 h."
          disabled={busy}
          onConfirm={() =>
            run(async () => {
              const r = await ok(
                api.tenant.POST('/webhooks/{webhookId}/secret/rotate', { ...path, body: {} }),
              );
              setSecret({ value: r.secret, previousUntil: r.previousSecretExpiresAt });
              onChanged();
              return 'The endpoint has a new signing secret.';
            })
          }
        />
        <ConfirmButton
          label="Delete endpoint"
          confirmLabel="Delete now"
          question="Delete this endpoint? Nothing more is sent to it."
          disabled={busy}
          onConfirm={() =>
            run(async () => {
              await ok(api.tenant.DELETE('/webhooks/{webhookId}', path));
              window.location.hash = '#/webhooks';
              return undefined;
            })
          }
        />
      </div>
      {!w.enabled ? (
        <p class="hint">
          {w.disabledReason === 'failing'
            ? 'The server disabled this endpoint after 5 days of nothing but failures. '
            : ''}
          A disabled endpoint gets no messages, not even tests.
        </p>
      ) : null}
      <Outcome error={error} status={status} />
    </section>
  );
}

function Replay({ api, w, onReplayed }: { api: Api; w: Webhook; onReplayed: () => void }) {
  const [since, setSince] = useState(() => toLocalInput(Date.now() - 3600_000));
  const { busy, error, status, run } = useAction();
  return (
    <section class="panel" aria-labelledby="replay-title">
      <h2 id="replay-title">Replay</h2>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            const from = fromLocalInput(since);
            if (from === null) throw new Error('Say since when: a date and time.');
            const r = await ok(
              api.tenant.POST('/webhooks/{webhookId}/replay', {
                params: { path: { webhookId: w.webhookId } },
                body: { since: from },
              }),
            );
            onReplayed();
            return `${r.replayed} ${r.replayed === 1 ? 'delivery' : 'deliveries'} queued again.`;
          });
        }}
      >
        <label>
          Replay since
          <input
            type="datetime-local"
            value={since}
            required
            onInput={(e) => setSince((e.currentTarget as HTMLInputElement).value)}
          />
        </label>
        <button type="submit" disabled={busy}>
          Replay deliveries
        </button>
      </form>
      <p class="hint">
        Every delivery created since then is sent again, each with its own <code>webhook-id</code> (receivers
        deduplicate by it). Deliveries are kept for 30 days.
      </p>
      <Outcome error={error} status={status} />
    </section>
  );
}

function lastAttempt(d: Delivery): string {
  const a = d.attempts[d.attempts.length - 1];
  if (!a) return '';
  return `${a.statusCode ?? 'no answer'} in ${a.latencyMs} ms`;
}

function DeliveriesTable({
  api,
  w,
  deliveries,
  onChanged,
}: {
  api: Api;
  w: Webhook;
  deliveries: Delivery[] | undefined;
  onChanged: () => void;
}) {
  const { busy, error, status, run } = useAction();
  return (
    <>
      <Outcome error={error} status={status} />
      <TableWrap labelledBy="deliveries-caption">
        <table>
          <caption id="deliveries-caption" class="visually-hidden">
            Deliveries
          </caption>
          <thead>
            <tr>
              <th scope="col">Message</th>
              <th scope="col">Status</th>
              <th scope="col">Attempts</th>
              <th scope="col">Created</th>
              <th scope="col">Next attempt</th>
              <th scope="col">Delivery ID</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {deliveries?.map((d) => (
              <tr key={d.deliveryId}>
                <th scope="row">
                  {d.type}
                  {d.eventType ? <span class="hint"> {d.eventType}</span> : null}
                </th>
                <td>
                  <span class={`badge delivery-${d.status}`}>{d.status}</span>
                  {d.lastError && d.status !== 'delivered' ? (
                    <div class="error-text wrap">{d.lastError}</div>
                  ) : null}
                </td>
                <td class="details">
                  <details>
                    <summary>
                      {d.attempts.length} {d.attempts.length === 1 ? 'attempt' : 'attempts'}
                      {d.attempts.length > 0 ? `, last ${lastAttempt(d)}` : ''}
                    </summary>
                    <ol class="attempts">
                      {d.attempts.map((a) => (
                        <li key={`${a.attemptedAt}-${a.latencyMs}`}>
                          {formatDateTime(a.attemptedAt)}: {a.statusCode ?? 'no answer'}, {a.latencyMs} ms
                          {a.error ? <span class="error-text"> — {a.error}</span> : null}
                        </li>
                      ))}
                    </ol>
                    <pre>{JSON.stringify(d.payload, null, 2)}</pre>
                  </details>
                </td>
                <td>{formatDateTime(d.createdAt)}</td>
                <td>{d.status === 'pending' ? formatTime(d.nextAttemptAt) : '—'}</td>
                <td>
                  <code class="id">{d.deliveryId}</code>
                </td>
                <td>
                  <button
                    type="button"
                    class="secondary"
                    disabled={busy || !w.enabled}
                    onClick={() =>
                      run(async () => {
                        await ok(
                          api.tenant.POST('/webhooks/{webhookId}/deliveries/{deliveryId}/retry', {
                            params: { path: { webhookId: w.webhookId, deliveryId: d.deliveryId } },
                            body: {},
                          }),
                        );
                        onChanged();
                        return `Delivery ${d.deliveryId} queued again.`;
                      })
                    }
                  >
                    Retry
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </>
  );
}
