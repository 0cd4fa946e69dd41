/**
 * `#/credentials`: the tenant's OAuth2 clients (CONTRACT §1, §15). Signed in as the operator: every
 * client with its scopes, create one (its secret shown once), delete one, rotate a secret. Signed in
 * with a client: the operator API is out of reach, so the page rotates a secret by client ID (the
 * tenant's own route, scope `tokens:issue`) and says who can do the rest.
 */
import type { paths } from '@liveline/tenant';
import { useState } from 'preact/hooks';
import { ok } from '../../shared/problem.ts';
import { Empty, ErrorAlert, formatDateTime } from '../../shared/ui.tsx';
import { type Api, CONSOLE_CLIENT_NAME } from '../auth.ts';
import { pollingFeed, useFeed } from '../live.ts';
import type { PageProps } from '../pages.tsx';
import { ConfirmButton, OneTimeSecret, Outcome, TableWrap, useAction } from './kit.tsx';

type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type ClientList = Json<paths['/admin/v1/tenants/{tenantId}/clients']['get']['responses'][200]>;
export type Client = ClientList['clients'][number];
type Scope = Client['scopes'][number];
type Rotated = Json<paths['/clients/{clientId}/secret/rotate']['post']['responses'][200]>;

/** Every scope a client may hold (CONTRACT §1), with what it allows. */
export const SCOPES: { scope: Scope; what: string }[] = [
  { scope: 'sessions:read', what: 'read sessions, cohorts and events' },
  { scope: 'commands:send', what: 'send realtime commands to headsets' },
  { scope: 'events:write', what: 'write events for a session' },
  { scope: 'tokens:issue', what: "mint players' device tokens, revoke them, rotate client secrets" },
  { scope: 'webhooks:manage', what: 'manage webhook endpoints' },
  { scope: 'campaigns:manage', what: 'manage campaigns, challenges and claims' },
  { scope: 'players:manage', what: "find, export and erase a player's data" },
];

export function CredentialsPage({ api }: PageProps) {
  return (
    <section aria-labelledby="page-title" class="manage">
      <h1 id="page-title">Credentials</h1>
      {api.admin && api.auth.tenantId ? (
        <OperatorClients api={api} admin={api.admin} tenantId={api.auth.tenantId} />
      ) : (
        <ClientSelfService api={api} />
      )}
    </section>
  );
}

/** A rotation's answer, with what happens to the old secret. */
function RotatedSecret({ rotated, onDone }: { rotated: Rotated; onDone: () => void }) {
  return (
    <OneTimeSecret label="New client secret" value={rotated.clientSecret} onDone={onDone}>
      <p class="hint">
        For client <code>{rotated.clientId}</code>
        {rotated.name ? ` (${rotated.name})` : ''}.{' '}
        {rotated.previousSecretExpiresAt === null
          ? 'The old secret stopped working at once.'
          : `The old secret keeps working until ${formatDateTime(rotated.previousSecretExpiresAt)}.`}{' '}
        Access tokens already issued stay valid until they expire.
      </p>
    </OneTimeSecret>
  );
}

function OperatorClients({
  api,
  admin,
  tenantId,
}: {
  api: Api;
  admin: NonNullable<Api['admin']>;
  tenantId: string;
}) {
  const [showDeleted, setShowDeleted] = useState(false);
  const { data, error, feed } = useFeed(
    () =>
      pollingFeed(
        () => ok(admin.GET('/admin/v1/tenants/{tenantId}/clients', { params: { path: { tenantId } } })),
        10_000,
      ),
    [admin, tenantId],
  );
  const [rotated, setRotated] = useState<Rotated | null>(null);
  const action = useAction();
  const clients = data?.clients.filter((c) => showDeleted || c.revokedAt === null) ?? [];
  const deleted = data ? data.clients.filter((c) => c.revokedAt !== null).length : 0;

  const rotate = (c: Client, immediately: boolean) =>
    action.run(async () => {
      const r = await ok(
        admin.POST('/admin/v1/tenants/{tenantId}/clients/{clientId}/secret/rotate', {
          params: { path: { tenantId, clientId: c.clientId } },
          body: immediately ? { immediately: true } : {},
        }),
      );
      setRotated(r);
      feed.refresh();
      return `The secret of ${c.name ?? c.clientId} was rotated.`;
    });

  return (
    <>
      <p class="hint">
        The OAuth2 clients of {api.auth.label}: backends get access tokens with them at{' '}
        <code>/oauth/token</code> (client credentials), limited to the client's scopes.
      </p>
      <ErrorAlert error={error} />
      {rotated ? <RotatedSecret rotated={rotated} onDone={() => setRotated(null)} /> : null}
      <Outcome error={action.error} status={action.status} />
      {data === undefined && !error ? <p aria-busy="true">Loading clients…</p> : null}
      {data ? (
        <TableWrap labelledBy="clients-caption">
          <table>
            <caption id="clients-caption">Clients</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Client ID</th>
                <th scope="col">Scopes</th>
                <th scope="col">Created</th>
                <th scope="col">Secret</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {clients.map((c) => (
                <ClientRow
                  key={c.clientId}
                  client={c}
                  own={c.clientId === api.auth.clientId}
                  busy={action.busy}
                  onRotate={(immediately) => rotate(c, immediately)}
                  onDelete={() =>
                    action.run(async () => {
                      await ok(
                        admin.DELETE('/admin/v1/tenants/{tenantId}/clients/{clientId}', {
                          params: { path: { tenantId, clientId: c.clientId } },
                        }),
                      );
                      feed.refresh();
                      return `Client ${c.name ?? c.clientId} deleted: its tokens and the device tokens it minted stopped working.`;
                    })
                  }
                />
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      {data && deleted > 0 ? (
        <label class="check">
          <input
            type="checkbox"
            checked={showDeleted}
            onChange={(e) => setShowDeleted((e.currentTarget as HTMLInputElement).checked)}
          />
          <span>Show deleted clients ({deleted})</span>
        </label>
      ) : null}
      {data?.clients.every((c) => c.clientId === api.auth.clientId || c.revokedAt !== null) ? (
        <Empty title="No clients of your own yet.">
          <p>
            Create one below for each backend that calls liveline, with only the scopes it needs. (The
            console's own client is made for this sign-in and deleted when you sign out.)
          </p>
        </Empty>
      ) : null}
      <CreateClient admin={admin} tenantId={tenantId} onCreated={() => feed.refresh()} />
    </>
  );
}

function ClientRow({
  client: c,
  own,
  busy,
  onRotate,
  onDelete,
}: {
  client: Client;
  own: boolean;
  busy: boolean;
  onRotate: (immediately: boolean) => Promise<unknown>;
  onDelete: () => Promise<unknown>;
}) {
  const [immediately, setImmediately] = useState(false);
  const name = c.name ?? c.clientId;
  const revoked = c.revokedAt !== null;
  return (
    <tr>
      <th scope="row" class="name">
        {c.name ?? <span class="hint">(no name)</span>}
        {own ? <span class="hint"> — this console's sign-in</span> : null}
        {!own && c.name === CONSOLE_CLIENT_NAME ? <span class="hint"> — another console sign-in</span> : null}
      </th>
      <td>
        <code class="id">{c.clientId}</code>
      </td>
      <td class="scopes">{c.scopes.join(', ')}</td>
      <td>{formatDateTime(c.createdAt)}</td>
      <td>
        {revoked ? (
          <span class="badge status-failed">deleted {formatDateTime(c.revokedAt)}</span>
        ) : c.previousSecretExpiresAt !== null && c.previousSecretExpiresAt > Date.now() ? (
          <span class="badge">old secret works until {formatDateTime(c.previousSecretExpiresAt)}</span>
        ) : (
          <span class="badge ok">active</span>
        )}
      </td>
      <td>
        {revoked ? null : own ? (
          <span class="hint">Signing out deletes it.</span>
        ) : (
          <div class="row-actions">
            <label class="check">
              <input
                type="checkbox"
                checked={immediately}
                onChange={(e) => setImmediately((e.currentTarget as HTMLInputElement).checked)}
              />
              <span>Old secret stops at once</span>
            </label>
            <ConfirmButton
              label="Rotate secret"
              confirmLabel="Rotate now"
              question={
                immediately
                  ? `Replace the secret of ${name}? The current one stops working at once.`
                  : `Replace the secret of ${name}? The current one keeps working for 24 h.`
              }
              disabled={busy}
              onConfirm={() => onRotate(immediately)}
            />
            <ConfirmButton
              label="Delete"
              confirmLabel="Delete client"
              question={`Delete ${name}? Its access tokens and the device tokens it minted stop working at once.`}
              disabled={busy}
              onConfirm={onDelete}
            />
          </div>
        )}
      </td>
    </tr>
  );
}

function CreateClient({
  admin,
  tenantId,
  onCreated,
}: {
  admin: NonNullable<Api['admin']>;
  tenantId: string;
  onCreated: () => void;
}) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<Scope[]>(SCOPES.map((s) => s.scope));
  const [created, setCreated] = useState<{ clientId: string; secret: string; scopes: string[] } | null>(null);
  const { busy, error, status, run } = useAction();
  return (
    <section class="panel" aria-labelledby="new-client-title">
      <h2 id="new-client-title">New client</h2>
      {created ? (
        <OneTimeSecret label="Client secret" value={created.secret} onDone={() => setCreated(null)}>
          <p class="hint">
            Client ID <code>{created.clientId}</code>, scopes {created.scopes.join(', ')}.
          </p>
        </OneTimeSecret>
      ) : null}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            if (scopes.length === 0) throw new Error('Give the client at least one scope.');
            const c = await ok(
              admin.POST('/admin/v1/tenants/{tenantId}/clients', {
                params: { path: { tenantId } },
                body: { ...(name.trim() ? { name: name.trim() } : {}), scopes },
              }),
            );
            setCreated({ clientId: c.clientId, secret: c.clientSecret, scopes: c.scopes });
            setName('');
            setScopes(SCOPES.map((s) => s.scope));
            onCreated();
            return `Client ${c.name ?? c.clientId} created.`;
          });
        }}
      >
        <label>
          Client name
          <input
            value={name}
            maxLength={200}
            onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)}
          />
        </label>
        <fieldset>
          <legend>Scopes</legend>
          <div class="checks">
            {SCOPES.map((s) => (
              <label key={s.scope} class="check">
                <input
                  type="checkbox"
                  checked={scopes.includes(s.scope)}
                  onChange={(e) => {
                    const on = (e.currentTarget as HTMLInputElement).checked;
                    setScopes(
                      on
                        ? [...scopes.filter((x) => x !== s.scope), s.scope]
                        : scopes.filter((x) => x !== s.scope),
                    );
                  }}
                />
                <span>
                  {s.scope} <span class="hint">({s.what})</span>
                </span>
              </label>
            ))}
          </div>
        </fieldset>
        <button type="submit" disabled={busy}>
          Create client
        </button>
        <Outcome error={error} status={status} />
      </form>
    </section>
  );
}

/** Signed in with a client: rotation through the tenant's route; the rest is the operator's. */
function ClientSelfService({ api }: { api: Api }) {
  const [clientId, setClientId] = useState(api.auth.clientId);
  const [immediately, setImmediately] = useState(false);
  const [rotated, setRotated] = useState<Rotated | null>(null);
  const { busy, error, status, run } = useAction();
  return (
    <>
      <Empty title="Listing, creating and deleting clients is the operator's.">
        <p>
          Sign in as the operator (with the admin token) to see every client of this tenant with its scopes,
          create clients and delete them. Signed in with client <code>{api.auth.clientId}</code>, you can
          rotate a client's secret here (that needs the scope <code>tokens:issue</code>).
        </p>
      </Empty>
      {rotated ? <RotatedSecret rotated={rotated} onDone={() => setRotated(null)} /> : null}
      <section class="panel" aria-labelledby="rotate-title">
        <h2 id="rotate-title">Rotate a client secret</h2>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              const r = await ok(
                api.tenant.POST('/clients/{clientId}/secret/rotate', {
                  params: { path: { clientId: clientId.trim() } },
                  body: immediately ? { immediately: true } : {},
                }),
              );
              setRotated(r);
              return clientId.trim() === api.auth.clientId
                ? "This console's client has a new secret: use it at your next sign-in."
                : 'The client has a new secret.';
            });
          }}
        >
          <label>
            Client ID
            <input
              value={clientId}
              required
              spellcheck={false}
              onInput={(e) => setClientId((e.currentTarget as HTMLInputElement).value)}
            />
          </label>
          <label class="check">
            <input
              type="checkbox"
              checked={immediately}
              onChange={(e) => setImmediately((e.currentTarget as HTMLInputElement).checked)}
            />
            <span>Old secret stops at once (else it keeps working for 24 h)</span>
          </label>
          <button type="submit" disabled={busy}>
            Rotate secret
          </button>
          <Outcome error={error} status={status} />
        </form>
      </section>
    </>
  );
}
