import type { Command } from 'commander';
import { adminRequest, type ConnectionOptions, resolveConnection } from './admin-client.ts';
import { CliError } from './errors.ts';
import { fields, json, table, time } from './format.ts';

interface Tenant {
  tenantId: string;
  name: string;
  createdAt: number;
}

interface Client {
  clientId: string;
  tenantId: string;
  name: string | null;
  scopes: string[];
  createdAt: number;
  revokedAt: number | null;
}

interface CreatedClient extends Omit<Client, 'revokedAt'> {
  clientSecret: string;
}

interface RotatedClient extends CreatedClient {
  previousSecretExpiresAt: number | null;
}

interface SigningKey {
  kid: string;
  createdAt: number;
  signing: boolean;
  retiresAt: number | null;
}

interface ListEnvelope {
  totalCount: number;
  hasMore: boolean;
}

interface CommonOptions extends ConnectionOptions {
  json?: boolean;
}

const out = (text: string): void => {
  process.stdout.write(text);
};
const seg = encodeURIComponent;

/** The options every admin command takes, on the leaf so they can follow its arguments. */
function withConnection(cmd: Command): Command {
  return cmd
    .option('--url <url>', 'server URL (default: $LIVELINE_URL, else http://127.0.0.1:$PORT, port 8080)')
    .option('--token <token>', 'operator token (default: $LIVELINE_ADMIN_TOKEN, else <data dir>/admin-token)')
    .option('--json', 'print the raw JSON answer');
}

function parseScopes(value: string): string[] {
  const scopes = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (scopes.length === 0)
    throw new CliError(
      'validation_failed',
      '--scopes needs at least one scope, e.g. sessions:read,commands:send',
    );
  return scopes;
}

function truncationNote(list: ListEnvelope, shown: number, what: string): string {
  return list.hasMore ? `(showing ${shown} of ${list.totalCount} ${what})\n` : '';
}

function registerTenantCommands(admin: Command) {
  const tenant = admin.command('tenant').description('tenants: the organisations whose backends use the API');

  withConnection(
    tenant.command('create').argument('<name>', 'display name').description('create a tenant'),
  ).action(async (name: string, opts: CommonOptions) => {
    const conn = resolveConnection(opts);
    const created = await adminRequest<Tenant>(conn, 'POST', '/admin/v1/tenants', { name });
    if (opts.json) return out(json(created));
    out(
      fields([
        ['tenantId', created.tenantId],
        ['name', created.name],
        ['createdAt', time(created.createdAt)],
      ]),
    );
  });

  withConnection(tenant.command('list').description('list tenants')).action(async (opts: CommonOptions) => {
    const conn = resolveConnection(opts);
    const list = await adminRequest<ListEnvelope & { tenants: Tenant[] }>(conn, 'GET', '/admin/v1/tenants');
    if (opts.json) return out(json(list));
    if (list.tenants.length === 0) return out('No tenants.\n');
    out(
      table(
        ['TENANT ID', 'NAME', 'CREATED'],
        list.tenants.map((t) => [t.tenantId, t.name, time(t.createdAt)]),
      ),
    );
    out(truncationNote(list, list.tenants.length, 'tenants'));
  });
}

function registerClientCommands(admin: Command) {
  const client = admin.command('client').description("a tenant's OAuth2 clients (client credentials)");

  withConnection(
    client
      .command('create')
      .argument('<tenantId>', 'the tenant the client belongs to')
      .option('--name <name>', 'a name to recognise the client by')
      .option('--scopes <a,b>', 'comma-separated scopes (default: all)', parseScopes)
      .description('create a client; its secret is printed once'),
  ).action(async (tenantId: string, opts: CommonOptions & { name?: string; scopes?: string[] }) => {
    const conn = resolveConnection(opts);
    const body: { name?: string; scopes?: string[] } = {};
    if (opts.name !== undefined) body.name = opts.name;
    if (opts.scopes !== undefined) body.scopes = opts.scopes;
    const created = await adminRequest<CreatedClient>(
      conn,
      'POST',
      `/admin/v1/tenants/${seg(tenantId)}/clients`,
      body,
    );
    if (opts.json) out(json(created));
    else {
      out(
        fields([
          ['clientId', created.clientId],
          ['clientSecret', created.clientSecret],
          ['tenantId', created.tenantId],
          ['name', created.name ?? '-'],
          ['scopes', created.scopes.join(' ')],
          ['createdAt', time(created.createdAt)],
        ]),
      );
    }
    process.stderr.write('Warning: store the client secret now; it will not be shown again.\n');
  });

  withConnection(
    client
      .command('list')
      .argument('<tenantId>', 'the tenant')
      .description("list a tenant's clients (never their secrets)"),
  ).action(async (tenantId: string, opts: CommonOptions) => {
    const conn = resolveConnection(opts);
    const list = await adminRequest<ListEnvelope & { clients: Client[] }>(
      conn,
      'GET',
      `/admin/v1/tenants/${seg(tenantId)}/clients`,
    );
    if (opts.json) return out(json(list));
    if (list.clients.length === 0) return out('No clients.\n');
    out(
      table(
        ['CLIENT ID', 'NAME', 'SCOPES', 'CREATED', 'REVOKED'],
        list.clients.map((c) => [
          c.clientId,
          c.name ?? '-',
          c.scopes.join(','),
          time(c.createdAt),
          time(c.revokedAt),
        ]),
      ),
    );
    out(truncationNote(list, list.clients.length, 'clients'));
  });

  withConnection(
    client
      .command('revoke')
      .argument('<tenantId>', 'the tenant')
      .argument('<clientId>', 'the client to revoke')
      .description('revoke a client: its tokens stop working at once'),
  ).action(async (tenantId: string, clientId: string, opts: CommonOptions) => {
    const conn = resolveConnection(opts);
    await adminRequest<null>(conn, 'DELETE', `/admin/v1/tenants/${seg(tenantId)}/clients/${seg(clientId)}`);
    if (opts.json) return out(json({ tenantId, clientId, revoked: true }));
    out(`Revoked client ${clientId}; its tokens stop working at once.\n`);
  });

  registerClientSecretCommand(client);
}

function registerClientSecretCommand(client: Command) {
  withConnection(
    client
      .command('rotate-secret')
      .argument('<tenantId>', 'the tenant')
      .argument('<clientId>', 'the client')
      .option('--immediately', 'stop the current secret at once (default: it keeps working for 24 h)')
      .description("replace a client's secret; the new one is printed once"),
  ).action(async (tenantId: string, clientId: string, opts: CommonOptions & { immediately?: boolean }) => {
    const conn = resolveConnection(opts);
    const rotated = await adminRequest<RotatedClient>(
      conn,
      'POST',
      `/admin/v1/tenants/${seg(tenantId)}/clients/${seg(clientId)}/secret/rotate`,
      opts.immediately ? { immediately: true } : {},
    );
    if (opts.json) out(json(rotated));
    else {
      out(
        fields([
          ['clientId', rotated.clientId],
          ['clientSecret', rotated.clientSecret],
          [
            'previousSecretExpiresAt',
            rotated.previousSecretExpiresAt === null ? 'now' : time(rotated.previousSecretExpiresAt),
          ],
        ]),
      );
    }
    process.stderr.write('Warning: store the client secret now; it will not be shown again.\n');
  });
}

function keyTable(keys: SigningKey[]): string {
  return table(
    ['KID', 'CREATED', 'SIGNS', 'RETIRES'],
    keys.map((k) => [k.kid, time(k.createdAt), k.signing ? 'yes' : 'no', time(k.retiresAt)]),
  );
}

function registerKeyCommands(admin: Command) {
  const keys = admin.command('keys').description('the keys that sign access and device tokens');

  withConnection(
    keys.command('list').description('list the signing keys, newest (the one that signs) last'),
  ).action(async (opts: CommonOptions) => {
    const conn = resolveConnection(opts);
    const list = await adminRequest<{ keys: SigningKey[] }>(conn, 'GET', '/admin/v1/keys');
    if (opts.json) return out(json(list));
    out(keyTable(list.keys));
  });

  withConnection(
    keys
      .command('rotate')
      .option(
        '--retire-others',
        'delete every other key at once (a key leaked): every token issued before stops working',
      )
      .description(
        'make a new signing key; it signs from now on, on every process; older keys verify until the longest token lifetime (30 days) has passed',
      ),
  ).action(async (opts: CommonOptions & { retireOthers?: boolean }) => {
    const conn = resolveConnection(opts);
    const rotated = await adminRequest<{ key: SigningKey; keys: SigningKey[] }>(
      conn,
      'POST',
      '/admin/v1/keys/rotate',
      opts.retireOthers ? { retireOthers: true } : {},
    );
    if (opts.json) return out(json(rotated));
    out(`New signing key ${rotated.key.kid}.\n`);
    out(keyTable(rotated.keys));
  });
}

/** `liveline admin ...`: the operator API over HTTP, against a running server. */
export function registerAdmin(program: Command) {
  const admin = program
    .command('admin')
    .description(
      'operator commands against a running server (token: --token, $LIVELINE_ADMIN_TOKEN or <data dir>/admin-token)',
    );
  registerTenantCommands(admin);
  registerClientCommands(admin);
  registerKeyCommands(admin);
}
