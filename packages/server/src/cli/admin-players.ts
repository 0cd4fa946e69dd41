import type { Command } from 'commander';
import { downloadTo } from './admin.ts';
import { adminRequest, type ConnectionOptions, resolveConnection } from './admin-client.ts';
import { json } from './format.ts';

interface Options extends ConnectionOptions {
  json?: boolean;
  out?: string;
}

const seg = encodeURIComponent;

/** A player export's counts, from its end line `{"kind":"end","counts":{…}}`. */
function playerCounts(end: Record<string, unknown>): Record<string, number> | null {
  const counts = end.counts;
  return counts !== null && typeof counts === 'object' ? (counts as Record<string, number>) : null;
}

/**
 * `liveline admin players erase|export <tenantId> <playerId>`: a player's data (CONTRACT §16) through
 * the operator's routes (`/admin/v1/tenants/{tenantId}/players/{playerId}`).
 */
export function registerPlayerCommands(admin: Command, withConnection: (cmd: Command) => Command) {
  const players = admin.command('players').description("a player's data: export it, erase it (GDPR)");

  withConnection(
    players
      .command('erase')
      .argument('<tenantId>', 'the tenant')
      .argument('<playerId>', 'the player')
      .description(
        "erase the player's data: gone at once for reads, from the store within 60 s; claims keep their codes",
      ),
  ).action(async (tenantId: string, playerId: string, opts: Options) => {
    const conn = resolveConnection(opts);
    const erased = await adminRequest<{ playerId: string; erasedAt: number }>(
      conn,
      'DELETE',
      `/admin/v1/tenants/${seg(tenantId)}/players/${seg(playerId)}`,
    );
    if (opts.json) process.stdout.write(json(erased));
    else
      process.stdout.write(
        `Erasing player ${erased.playerId} (asked at ${new Date(erased.erasedAt).toISOString()}); done within 60 s.\n`,
      );
  });

  withConnection(
    players
      .command('export')
      .argument('<tenantId>', 'the tenant')
      .argument('<playerId>', 'the player')
      .option('--out <file>', 'write to this file (default: standard output); written whole or not at all')
      .description(
        'everything kept of the player as NDJSON: sessions, events, commands, screenshots, claims',
      ),
  ).action(async (tenantId: string, playerId: string, opts: Options) => {
    const conn = resolveConnection(opts);
    const apiPath = `/admin/v1/tenants/${seg(tenantId)}/players/${seg(playerId)}/export`;
    const counts = await downloadTo(conn, apiPath, opts.out, playerCounts);
    const what = Object.entries(counts)
      .map(([kind, n]) => `${n} ${kind}`)
      .join(', ');
    if (opts.json && opts.out !== undefined) process.stdout.write(json({ counts, out: opts.out }));
    else process.stderr.write(`Exported ${what}${opts.out === undefined ? '' : ` to ${opts.out}`}.\n`);
  });
}
