import { useState } from 'preact/hooks';
import { asApiError } from '../shared/problem.ts';
import { ErrorAlert } from '../shared/ui.tsx';
import { type Api, listTenants, signInAsOperator, signInWithClient, type TenantChoice } from './auth.ts';

/** Sign-in: a tenant's client credentials, or the operator's admin token and a tenant. */
export function SignIn({ onSignedIn, notice }: { onSignedIn: (api: Api) => void; notice?: string }) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [adminToken, setAdminToken] = useState('');
  const [tenants, setTenants] = useState<TenantChoice[] | null>(null);
  const [tenantId, setTenantId] = useState('');

  const attempt = async (work: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await work();
    } catch (err) {
      setError(asApiError(err));
    } finally {
      setBusy(false);
    }
  };

  const onClient = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const clientId = String(form.get('clientId') ?? '').trim();
    const clientSecret = String(form.get('clientSecret') ?? '').trim();
    void attempt(async () => onSignedIn(await signInWithClient(clientId, clientSecret)));
  };

  const onAdmin = (e: Event) => {
    e.preventDefault();
    void attempt(async () => {
      const list = await listTenants(adminToken.trim());
      setTenants(list);
      setTenantId(list[0]?.tenantId ?? '');
    });
  };

  const onTenant = (e: Event) => {
    e.preventDefault();
    const choice = tenants?.find((t) => t.tenantId === tenantId);
    if (!choice) return;
    void attempt(async () => onSignedIn(await signInAsOperator(adminToken.trim(), choice)));
  };

  return (
    <main class="signin">
      <h1>liveline console</h1>
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : null}
      <ErrorAlert error={error} />
      <form onSubmit={onClient} aria-labelledby="signin-client">
        <h2 id="signin-client">Sign in with a client</h2>
        <p class="hint">A client of your tenant (the operator creates it, with the scopes it may use).</p>
        <label>
          Client ID
          <input name="clientId" required autocomplete="username" spellcheck={false} />
        </label>
        <label>
          Client secret
          <input name="clientSecret" type="password" required autocomplete="current-password" />
        </label>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>

      <form onSubmit={tenants ? onTenant : onAdmin} aria-labelledby="signin-operator">
        <h2 id="signin-operator">Operator</h2>
        <p class="hint">
          The admin token (<code>LIVELINE_ADMIN_TOKEN</code>, or <code>data/admin-token</code>), then a
          tenant.
        </p>
        <label>
          Admin token
          <input
            name="adminToken"
            type="password"
            required
            autocomplete="off"
            value={adminToken}
            onInput={(e) => {
              setAdminToken((e.currentTarget as HTMLInputElement).value);
              setTenants(null);
            }}
          />
        </label>
        {tenants && tenants.length === 0 ? (
          <p class="empty-title">
            No tenants yet. Create one with <code>npm run liveline -- admin tenant create "My studio"</code>,
            then sign in again.
          </p>
        ) : null}
        {tenants && tenants.length > 0 ? (
          <label>
            Tenant
            <select
              value={tenantId}
              onChange={(e) => setTenantId((e.currentTarget as HTMLSelectElement).value)}
            >
              {tenants.map((t) => (
                <option key={t.tenantId} value={t.tenantId}>
                  {t.name} ({t.tenantId.slice(0, 8)})
                </option>
              ))}
            </select>
          </label>
        ) : null}
        <button type="submit" disabled={busy || (tenants !== null && tenants.length === 0)}>
          {tenants ? 'Open tenant' : 'Continue'}
        </button>
      </form>
    </main>
  );
}
