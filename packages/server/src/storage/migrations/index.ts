import type { Migration, MigrationProvider } from 'kysely';
import * as m001 from './001-foundation.ts';
import * as m002 from './002-realtime.ts';
import * as m003 from './003-webhooks.ts';
import * as m004 from './004-rewards.ts';
import * as m005 from './005-byte-order.ts';
import * as m006 from './006-revocation.ts';
import * as m007 from './007-quotas-cancel.ts';
import * as m008 from './008-list-indexes.ts';
import * as m009 from './009-open-commands.ts';
import * as m010 from './010-event-retention.ts';
import * as m011 from './011-webhook-fanout.ts';
import * as m012 from './012-event-tail.ts';
import * as m013 from './013-command-batches.ts';
import * as m014 from './014-alerts.ts';
import * as m015 from './015-screenshots.ts';
import * as m016 from './016-players.ts';
import * as m017 from './017-webhook-outage.ts';
import * as m018 from './018-command-indexes.ts';

/** Every migration, in order. Names sort lexically; never rename or edit one that has shipped. */
const all: Record<string, Migration> = {
  '001-foundation': m001,
  '002-realtime': m002,
  '003-webhooks': m003,
  '004-rewards': m004,
  '005-byte-order': m005,
  '006-revocation': m006,
  '007-quotas-cancel': m007,
  '008-list-indexes': m008,
  '009-open-commands': m009,
  '010-event-retention': m010,
  '011-webhook-fanout': m011,
  '012-event-tail': m012,
  '013-command-batches': m013,
  '014-alerts': m014,
  '015-screenshots': m015,
  '016-players': m016,
  '017-webhook-outage': m017,
  '018-command-indexes': m018,
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => all,
};
