// Vitest's global setup: builds the bundle the process tests start (packages/server/scripts/bundle.mjs),
// once per test run, so that it is never older than the source under test.
// @ts-expect-error a plain ES module without type declarations
import { bundle } from '../scripts/bundle.mjs';

export default async function setup() {
  await bundle();
}
