/**
 * The console's "Send to cohort" page (CONTRACT §12) and its live tail (CONTRACT §11) in Chromium,
 * against a real server with headsets made of the real device SDK.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LivelineDevice } from '../../../client/src/index.ts';
import { createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';
import { ensureConsoleBuilt, launchChromium, screenshot, seriousViolations } from './browser.ts';

const LIVE_MS = 6000;

let browser: Browser;
beforeAll(async () => {
  ensureConsoleBuilt();
  browser = await launchChromium();
}, 180_000);
afterAll(async () => browser?.close());

describe.each(backends)('the console: cohort commands and the live tail in Chromium (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  let context: BrowserContext;
  let page: Page;
  const devices: LivelineDevice[] = [];

  beforeAll(async () => {
    server = await startTestServer(backend);
    base = server.url;
    tenant = await createTenant(base, server.adminToken, { name: 'Cohort studio' });
  });
  afterAll(async () => server?.close());
  beforeEach(async () => {
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
  });
  afterEach(async () => {
    await Promise.all(devices.splice(0).map((d) => d.close()));
    await context?.close();
  });

  async function headset(playerId: string, cohort: string) {
    const token = await deviceToken(base, tenant.token, playerId, cohort);
    const device = new LivelineDevice({ baseUrl: base, token, flushIntervalMs: 50 });
    devices.push(device);
    const session = await device.startSession({ device: { model: 'Quest 3', os: 'Android 14' } });
    await device.connect();
    return { device, sessionId: session.sessionId };
  }

  async function signIn() {
    await page.goto(`${base}/console`);
    await page.getByLabel('Client ID').fill(tenant.clientId);
    await page.getByLabel('Client secret').fill(tenant.clientSecret);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  const count = (status: string) =>
    page
      .getByRole('table', { name: 'Batch progress' })
      .getByRole('row')
      .filter({ has: page.getByRole('rowheader', { name: status, exact: true }) })
      .getByRole('cell');

  it('sends text and a stream start to a cohort and shows the batch settle, refusals by session', async () => {
    const cohort = 'class-7b';
    const heads = await Promise.all(['7b-1', '7b-2', '7b-3'].map((p) => headset(p, cohort)));
    const outsider = await headset('other-1', 'class-8a');
    const texts: string[][] = heads.map(() => []);
    for (const [i, h] of heads.entries()) h.device.onText((text) => void texts[i].push(text));
    const outsiderTexts: string[] = [];
    outsider.device.onText((text) => void outsiderTexts.push(text));
    for (const h of heads) {
      h.device.onStreamStart(() => undefined);
      h.device.onStreamStop(() => undefined);
    }

    await signIn();
    // From the table filtered by the cohort, its link opens the form with the cohort filled in.
    await page.getByLabel('Cohort').fill(cohort);
    await page.getByLabel('Cohort').press('Enter');
    await page
      .getByText(`3 sessions active within 5 minutes in cohort ${cohort}`)
      .waitFor({ timeout: LIVE_MS });
    await page.getByRole('link', { name: 'Send a command to this cohort' }).click();
    await page.getByRole('heading', { name: 'Send to cohort', level: 1 }).waitFor();
    expect(await page.getByLabel('Cohort ID').inputValue()).toBe(cohort);

    await page.getByLabel('Message').fill('Eyes on the board');
    await page.getByRole('button', { name: 'Send text to cohort' }).click();
    const status = page.getByRole('status').filter({ hasText: 'to cohort' });
    await expect
      .poll(() => status.innerText(), { timeout: LIVE_MS })
      .toMatch(/^Text to cohort class-7b: 3 sessions, 3 accepted, 0 refused\./);
    await expect.poll(() => count('acknowledged').innerText(), { timeout: LIVE_MS }).toBe('3');
    expect(await count('queued').innerText()).toBe('0');
    expect(await count('delivered').innerText()).toBe('0');
    await expect.poll(() => status.innerText(), { timeout: LIVE_MS }).toContain('Every command has settled.');
    expect(texts).toEqual([['Eyes on the board'], ['Eyes on the board'], ['Eyes on the board']]);
    expect(outsiderTexts).toEqual([]);

    // One headset already streams: the cohort's stream start refuses it alone.
    const first = heads[0];
    const started = await fetch(`${base}/sessions/${first.sessionId}/realtime/commands/stream`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ resolution: 2, aspectratio: 0 }),
    });
    expect(started.status).toBe(202);
    await expect
      .poll(
        async () => {
          const res = await fetch(`${base}/sessions/${first.sessionId}`, {
            headers: { authorization: `Bearer ${tenant.token}` },
          });
          return ((await res.json()) as { stream: { state: string } }).stream.state;
        },
        { timeout: LIVE_MS },
      )
      .toBe('streaming');

    await page.getByRole('button', { name: 'Start stream on cohort' }).click();
    await expect
      .poll(() => status.innerText(), { timeout: LIVE_MS })
      .toMatch(/^Start stream to cohort class-7b: 3 sessions, 2 accepted, 1 refused\./);
    await expect.poll(() => count('acknowledged').innerText(), { timeout: LIVE_MS }).toBe('2');
    const refused = page.getByRole('table', { name: 'Refused sessions' });
    const refusedRow = refused
      .getByRole('row')
      .filter({ has: page.getByRole('rowheader', { name: first.sessionId }) });
    expect(await refusedRow.innerText()).toContain('already_streaming');
    await screenshot(page, `${backend}-console-cohort-batch`);
    expect(await seriousViolations(page)).toEqual([]);

    await page.getByRole('button', { name: 'Stop stream on cohort' }).click();
    await expect
      .poll(() => status.innerText(), { timeout: LIVE_MS })
      .toMatch(/^Stop stream to cohort class-7b: 3 sessions, 3 accepted, 0 refused\./);
    await expect.poll(() => count('acknowledged').innerText(), { timeout: LIVE_MS }).toBe('3');
  });

  it('refuses a batch without a cohort, and shows a refusal of the server in an alert', async () => {
    await signIn();
    await page.goto(`${base}/console#/cohort`);
    await page.getByRole('button', { name: 'Start stream on cohort' }).click();
    await expect
      .poll(() => page.getByRole('alert').innerText(), { timeout: LIVE_MS })
      .toContain('Name the cohort');
    await page.getByLabel('Cohort ID').fill('x'.repeat(200));
    await page.getByRole('button', { name: 'Stop stream on cohort' }).click();
    // The server's problem detail (the cohort id is longer than 128 characters).
    await expect
      .poll(() => page.getByRole('alert').innerText(), { timeout: LIVE_MS })
      .not.toContain('Name the cohort');
    expect(await page.getByRole('alert').innerText()).toMatch(/longer|128/);
  });

  it('the sessions table and a session’s events are kept current by the live tail', async () => {
    const h = await headset('tail-player', 'class-tail');
    await signIn();
    await page.getByText(/updated live\./).waitFor({ timeout: LIVE_MS });
    const row = page
      .getByRole('table', { name: 'Live sessions' })
      .getByRole('row')
      .filter({ has: page.getByRole('rowheader', { name: 'tail-player', exact: true }) });
    await row.waitFor({ timeout: LIVE_MS });
    h.device.track({ eventType: 'Health', fps: 90, batteryLevel: 64 });
    await h.device.flush();
    await expect
      .poll(async () => (await row.getByRole('cell').allInnerTexts()).slice(5, 7), { timeout: LIVE_MS })
      .toEqual(['64 %', '90']);

    await row.getByRole('link', { name: 'tail-player' }).click();
    const events = page.getByRole('region', { name: 'Events' });
    await events.getByText('Health').first().waitFor({ timeout: LIVE_MS });
    h.device.track({ eventType: 'Error', severity: 'Warning', message: 'thermal throttling' });
    await h.device.flush();
    await expect
      .poll(() => events.getByRole('listitem').first().innerText(), { timeout: LIVE_MS })
      .toContain('thermal throttling');
  });
});
