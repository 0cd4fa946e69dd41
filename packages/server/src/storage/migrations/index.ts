import type { Migration, MigrationProvider } from 'kysely';
import * as m001 from './001-foundation.ts';

/** Every migration, in order. Names sort lexically; never rename or edit one that has shipped. */
const all: Record<string, Migration> = {
  '001-foundation': m001,
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => all,
};
