import type { Migration, MigrationProvider } from 'kysely';
import * as m001 from './001-foundation.ts';
import * as m002 from './002-realtime.ts';
import * as m003 from './003-webhooks.ts';
import * as m004 from './004-rewards.ts';

/** Every migration, in order. Names sort lexically; never rename or edit one that has shipped. */
const all: Record<string, Migration> = {
  '001-foundation': m001,
  '002-realtime': m002,
  '003-webhooks': m003,
  '004-rewards': m004,
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => all,
};
