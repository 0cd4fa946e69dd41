import fs from 'node:fs';
import { Transform, type TransformCallback, type Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { Command } from 'commander';
import {
  adminDownload,
  adminRequest,
  type Connection,
  type ConnectionOptions,
  resolveConnection,
} from './admin-client.ts';
import { registerPlayerCommands } from './admin-players.ts';
import { CliError } from './errors.ts';
import { fields, json, table, time } from './format.ts';

interface Tenant {
  tenantId: string;
  name: string;
  createdAt: number;
  eventRetentionDays: number | null;
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

/** `<days>` of `tenant retention`: a whole number of days, or `default` (null: the server's setting). */
function parseRetention(value: string): number | null {
  if (value === 'default') return null;
  if (!/^\d{1,5}$/.test(value))
    throw new CliError(
      'validation_failed',
      `<days> must be a whole number of days (0: forever) or "default", got "${value}".`,
    );
  return Number(value);
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

  withConnection(
    tenant
      .command('retention')
      .argument('<tenantId>', 'the tenant')
      .argument(
        '<days>',
        'days its events are kept after the server received them; 0: forever; default: the server setting',
        parseRetention,
      )
      .description("set how long a tenant's events are kept (LIVELINE_EVENT_RETENTION_DAYS for this tenant)"),
  ).action(async (tenantId: string, days: number | null, opts: CommonOptions) => {
    const conn = resolveConnection(opts);
    const updated = await adminRequest<Tenant>(conn, 'PATCH', `/admin/v1/tenants/${seg(tenantId)}`, {
      eventRetentionDays: days,
    });
    if (opts.json) return out(json(updated));
    out(
      fields([
        ['tenantId', updated.tenantId],
        [
          'eventRetentionDays',
          updated.eventRetentionDays === null
            ? 'default (server setting)'
            : updated.eventRetentionDays === 0
              ? '0 (forever)'
              : String(updated.eventRetentionDays),
        ],
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

/** Passes bytes through and keeps the last line, so the export's closing `end` line can be checked. */
class LastLine extends Transform {
  private tail = '';

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    // The end line is short: the last 4 KiB always hold it whole.
    this.tail = (this.tail + chunk.toString('utf8')).slice(-4096);
    done(null, chunk);
  }

  /** The last line parsed, when it is the `{"kind":"end",...}` line; null otherwise (a cut export). */
  endLine(): Record<string, unknown> | null {
    const lines = this.tail.split('\n').filter(Boolean);
    try {
      const last = JSON.parse(lines[lines.length - 1] ?? '') as Record<string, unknown> | null;
      if (last !== null && typeof last === 'object' && last.kind === 'end') return last;
    } catch {
      // not JSON: cut short
    }
    return null;
  }
}

/** A tenant export's counts, from its end line. */
function tenantSummary(end: Record<string, unknown>): { sessions: number; events: number } | null {
  return typeof end.sessions === 'number' && typeof end.events === 'number'
    ? { sessions: end.sessions, events: end.events }
    : null;
}

/** `--since`: an RFC 3339 time, passed on as the server reads it; checked here for a clear message. */
function parseSince(value: string): string {
  if (
    !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/i.test(value) ||
    Number.isNaN(Date.parse(value))
  )
    throw new CliError(
      'validation_failed',
      `--since must be an RFC 3339 time such as 2026-01-31T00:00:00Z, got "${value}".`,
    );
  return value;
}

/**
 * Downloads an NDJSON export into `sink`; `summary` reads its end line. A CliError when the end line is
 * missing (or not what `summary` expects): the export is incomplete.
 */
export async function download<T>(
  conn: Connection,
  apiPath: string,
  sink: Writable,
  end: boolean,
  summary: (end: Record<string, unknown>) => T | null,
): Promise<T> {
  const tail = new LastLine();
  tail.pipe(sink, { end });
  await adminDownload(conn, apiPath, tail);
  // Every byte handed on to the sink (and, for a file, written) before the end line is checked.
  await finished(tail);
  if (end) await finished(sink);
  const last = tail.endLine();
  const result = last && summary(last);
  if (!result)
    throw new CliError('incomplete_export', 'The export ended without its end line: it is incomplete.');
  return result;
}

/**
 * Writes an export to `out` (beside it, renamed once complete: a cut export never looks like a whole
 * one) or, without `out`, to standard output.
 */
export async function downloadTo<T>(
  conn: Connection,
  apiPath: string,
  out: string | undefined,
  summary: (end: Record<string, unknown>) => T | null,
): Promise<T> {
  if (out === undefined) return download(conn, apiPath, process.stdout, false, summary);
  const partial = `${out}.partial`;
  try {
    const result = await download(
      conn,
      apiPath,
      fs.createWriteStream(partial, { flags: 'w' }),
      true,
      summary,
    );
    fs.renameSync(partial, out);
    return result;
  } catch (err) {
    fs.rmSync(partial, { force: true });
    throw err;
  }
}

function registerExportCommand(admin: Command) {
  withConnection(
    admin
      .command('export')
      .requiredOption('--tenant <tenantId>', 'the tenant to export')
      .option('--since <time>', 'only sessions started at or after this RFC 3339 time', parseSince)
      .option('--out <file>', 'write to this file (default: standard output); written whole or not at all')
      .description("a tenant's sessions and events as NDJSON, streamed: each session, then its events"),
  ).action(async (opts: CommonOptions & { tenant: string; since?: string; out?: string }) => {
    const conn = resolveConnection(opts);
    const query = opts.since === undefined ? '' : `?since=${encodeURIComponent(opts.since)}`;
    const apiPath = `/admin/v1/tenants/${seg(opts.tenant)}/export${query}`;
    const summary = await downloadTo(conn, apiPath, opts.out, tenantSummary);
    if (opts.out === undefined) {
      process.stderr.write(`Exported ${summary.sessions} sessions and ${summary.events} events.\n`);
      return;
    }
    const line = `Exported ${summary.sessions} sessions and ${summary.events} events to ${opts.out}.\n`;
    if (opts.json) out(json({ ...summary, out: opts.out }));
    else process.stderr.write(line);
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
  registerExportCommand(admin);
  registerPlayerCommands(admin, withConnection);
}
