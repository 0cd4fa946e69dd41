import pg from 'pg';

/** Drops a PostgreSQL schema that a test or benchmark made for itself (DATABASE_URL's database). */
export async function dropSchema(schema: string) {
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query(`drop schema if exists "${schema}" cascade`);
  } finally {
    await client.end();
  }
}
