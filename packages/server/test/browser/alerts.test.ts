/**
 * The console's Alerts page (CONTRACT §13) in Chromium against a real server: a bad rule's 400 shown
 * with its detail, a rule created, an incident opened when a headset (the real device SDK) reports a
 * low battery and resolved when it recovers, and the rule deleted. What the page did is checked at the API.
 */
import { verifyWebhook } from '@liveline/tenant';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LivelineDevice } from '../../../client/src/index.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';
import { ensureConsoleBuilt, launchChromium, screenshot, seriousViolations } from './browser.ts';

const LIVE_MS = 6000;

let browser: Browser;
beforeAll(async () => {
  ensureConsoleBuilt();
  browser = await launchChromium();
}, 180_000);
afterAll(async () => browser?.close());

describe.each(backends)('the console: alert rules and their incidents in Chromium (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  let context: BrowserContext;
  let page: Page;
  const devices: LivelineDevice[] = [];

  beforeAll(async () => {
    server = await startTestServer(backend, {
      LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
      LIVELINE_WEBHOOK_POLL_MS: '100',
    });
    base = server.url;
    tenant = await createTenant(base, server.adminToken, { name: 'Alert studio' });
  });
  afterAll(async () => server?.close());
  beforeEach(async () => {
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(LIVE_MS);
  });
  afterEach(async () => {
    await Promise.all(devices.splice(0).map((d) => d.close()));
    await context?.close();
  });

  async function signIn() {
    await page.goto(`${base}/console`);
    await page.getByLabel('Client ID').fill(tenant.clientId);
    await page.getByLabel('Client secret').fill(tenant.clientSecret);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  it('creates a rule (a bad one refused with the detail), shows the incident of a low battery, deletes it', async () => {
    const receiver = await startReceiver();
    await signIn();
    // The alert messages to a real receiver: an endpoint for them made on the Webhooks page.
    await page.getByRole('link', { name: 'Webhooks', exact: true }).click();
    await page.getByLabel('Endpoint URL', { exact: true }).fill(receiver.url);
    await page.getByRole('checkbox', { name: /^alert\.triggered/ }).check();
    await page.getByRole('checkbox', { name: /^alert\.resolved/ }).check();
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    const secret = await page.getByLabel('Signing secret', { exact: true }).inputValue();
    const hooks = await call<{ webhooks: { types: string[] }[] }>(base, 'GET', '/webhooks', {
      token: tenant.token,
    });
    expect(hooks.body.webhooks.map((w) => w.types)).toEqual([['alert.triggered', 'alert.resolved']]);
    await page.getByRole('button', { name: 'I have stored it' }).click();

    await page.getByRole('link', { name: 'Alerts', exact: true }).click();
    await page.getByRole('heading', { name: 'Alerts', level: 1 }).waitFor();
    await page.getByText('No alert rules yet.').waitFor();

    // batteryLevel is not a field of Error: the API's 400 names the allowed fields, and the page shows it.
    await page.getByLabel('Alert name').fill('Wrong field');
    await page.getByLabel('Event type').selectOption('Error');
    await page.getByLabel('Field').fill('batteryLevel');
    await page.getByLabel('Value').fill('15');
    await page.getByRole('button', { name: 'Create alert rule' }).click();
    const refusal = page.getByRole('alert');
    await refusal.waitFor({ timeout: LIVE_MS });
    expect(await refusal.innerText()).toMatch(/field/i);
    expect(await refusal.innerText()).toContain('severity');

    await page.getByLabel('Alert name').fill('Low battery');
    await page.getByLabel('Event type').selectOption('Health');
    await page.getByLabel('Field').fill('batteryLevel');
    await page.getByLabel('Operator').selectOption('lt');
    await page.getByLabel('Value').fill('15');
    await page.getByLabel('Cooldown (seconds)').fill('600');
    await page.getByRole('button', { name: 'Create alert rule' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: 'Alert rule Low battery created: Health batteryLevel < 15.' })
      .waitFor({ timeout: LIVE_MS });
    const rules = page.getByRole('table', { name: 'Alert rules' });
    await rules.getByRole('rowheader', { name: 'Low battery' }).waitFor({ timeout: LIVE_MS });
    expect(await rules.innerText()).toContain('every cohort');

    const listed = await call<{ alerts: Record<string, unknown>[] }>(base, 'GET', '/alerts', {
      token: tenant.token,
    });
    expect(listed.body.alerts).toEqual([
      expect.objectContaining({
        name: 'Low battery',
        eventType: 'Health',
        field: 'batteryLevel',
        op: 'lt',
        value: 15,
        tenantCohortId: null,
        forSeconds: 0,
        cooldownSeconds: 600,
      }),
    ]);

    await rules.getByRole('link', { name: 'Low battery' }).click();
    await page.getByRole('heading', { name: 'Low battery', level: 1 }).waitFor();
    await page.getByText('No incidents yet.').waitFor({ timeout: LIVE_MS });

    // A headset's battery falls under 15: the incident appears without a reload, then resolves.
    const token = await deviceToken(base, tenant.token, 'headset-7', 'class-7b');
    // Health every 5 s of device time, from a minute ago (events of one instant have no order).
    let now = Date.now() - 60_000;
    const clock = { now: () => (now += 5000) };
    const device = new LivelineDevice({ baseUrl: base, token, flushIntervalMs: 50, clock });
    devices.push(device);
    const { sessionId } = await device.startSession({ device: { model: 'Quest 3' } });
    device.track({ eventType: 'Health', batteryLevel: 40 });
    device.track({ eventType: 'Health', batteryLevel: 12 });
    await device.flush();
    const alertId = String(listed.body.alerts[0].alertId);
    await expect
      .poll(
        async () =>
          (
            await call<{ incidents: { status: string }[] }>(base, 'GET', `/alerts/${alertId}/incidents`, {
              token: tenant.token,
            })
          ).body.incidents.map((i) => i.status),
        { timeout: 20_000 },
      )
      .toEqual(['open']);
    const incidents = page.getByRole('table', { name: 'Incidents' });
    const row = incidents.getByRole('row').filter({ has: page.getByRole('rowheader', { name: sessionId }) });
    await expect.poll(() => row.innerText().catch(() => ''), { timeout: LIVE_MS }).toMatch(/^open\s/);
    expect(await row.innerText()).toContain('headset-7');
    expect(await row.innerText()).toContain('class-7b');
    await screenshot(page, `${backend}-console-alert-incident`);
    expect(await seriousViolations(page)).toEqual([]);

    device.track({ eventType: 'Health', batteryLevel: 60 });
    await device.flush();
    await expect
      .poll(() => row.innerText(), { timeout: LIVE_MS })
      .toMatch(/^resolved\s[\s\S]*condition cleared/);

    // The receiver got both messages, signed with the secret the page showed.
    await expect.poll(() => receiver.received.length, { timeout: LIVE_MS }).toBe(2);
    const messages = receiver.received.map((r) => verifyWebhook(r.body, r.headers, secret));
    expect(messages.map((m) => m.type)).toEqual(['alert.triggered', 'alert.resolved']);
    expect(messages[0].data).toMatchObject({
      alertId,
      name: 'Low battery',
      sessionId,
      playerId: 'headset-7',
      tenantCohortId: 'class-7b',
      event: { eventType: 'Health', batteryLevel: 12 },
    });
    await receiver.stop();

    // Deleted from the list: gone at the API too.
    await page.getByRole('link', { name: '← Alerts' }).click();
    await rules.getByRole('button', { name: 'Delete' }).click();
    await rules.getByRole('button', { name: 'Delete Low battery' }).click();
    await page.getByText('No alert rules yet.').waitFor({ timeout: LIVE_MS });
    const after = await call<{ alerts: unknown[] }>(base, 'GET', '/alerts', { token: tenant.token });
    expect(after.body.alerts).toEqual([]);
    expect(await seriousViolations(page)).toEqual([]);
  }, 60_000);
});
