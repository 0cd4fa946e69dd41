/**
 * Helpers for the browser tests: Debian's Chromium driven by playwright-core, the console built
 * when its sources changed, screenshots kept outside the repository, and axe-core's checks.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { type Browser, chromium, type Page } from 'playwright-core';

export const CHROMIUM = process.env.LIVELINE_CHROMIUM ?? '/usr/bin/chromium';

/** The flags this machine needs (no sandbox as root, no network beyond the test's server). */
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const CONSOLE = path.resolve(import.meta.dirname, '../../../console');
const REPO = path.resolve(CONSOLE, '../..');

/** Where screenshots go: `LIVELINE_SCREENSHOT_DIR`, else a folder in the system's temp dir. */
export const SCREENSHOT_DIR =
  process.env.LIVELINE_SCREENSHOT_DIR ?? path.join(os.tmpdir(), 'liveline-screenshots');

/** Fails with what to do when Chromium is missing: the browser tests never skip silently. */
export async function launchChromium(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM}: the browser tests need it. ` +
        'Install it with `apt-get install -y chromium` (.ci/run does), or set LIVELINE_CHROMIUM to its path.',
    );
  }
  return chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
}

function newestMtime(entry: string): number {
  const stat = fs.statSync(entry);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...fs.readdirSync(entry).map((name) => newestMtime(path.join(entry, name))));
}

function isStale(): boolean {
  const sources = ['src', 'console', 'viewer', 'vite.config.ts'].map((p) => path.join(CONSOLE, p));
  const built = ['console', 'viewer'].map((page) => path.join(CONSOLE, 'dist', page, 'index.html'));
  if (!built.every((f) => fs.existsSync(f))) return true;
  return Math.max(...sources.map(newestMtime)) > Math.min(...built.map((f) => fs.statSync(f).mtimeMs));
}

const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * The pages as their sources are now: built again when a source is newer than the build (npm install
 * built them once; a test run after an edit must not test the old pages). Test files run in parallel:
 * one builds while the others wait (a lock directory), so no server serves a half-written build.
 */
export function ensureConsoleBuilt() {
  if (!isStale()) return;
  const lock = path.join(CONSOLE, '.build-lock');
  const deadline = Date.now() + 180_000;
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch {
      // Another test file builds: wait for it (a lock left by a killed run goes after 3 minutes).
      const age = Date.now() - (fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 180_000) fs.rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`Waited 3 minutes for ${lock}: remove it if no build runs.`);
      sleep(200);
    }
  }
  try {
    if (isStale()) {
      execFileSync(process.execPath, [path.join(CONSOLE, 'scripts', 'build.mjs')], {
        cwd: REPO,
        stdio: 'inherit',
        timeout: 120_000,
      });
    }
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
  if (isStale()) throw new Error('The console did not build (packages/console/dist is missing or stale).');
}

/** A full-page screenshot, `<SCREENSHOT_DIR>/<name>.png`: part of the test's output, never committed. */
export async function screenshot(page: Page, name: string) {
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

/** axe-core's findings of impact serious or critical (WCAG 2.x A/AA and best practices). */
export async function seriousViolations(page: Page) {
  const results = await new AxeBuilder({ page }).analyze();
  return results.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => n.target.join(' ')),
    }));
}
