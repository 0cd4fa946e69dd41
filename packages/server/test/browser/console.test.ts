/**
 * The web console (CONTRACT §10) in a real browser: Debian's Chromium driven by playwright-core
 * against a real server, with headsets made of the real device SDK. It finds everything by the
 * accessible names of the contract (labels, roles, button text), as a screen reader would.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LivelineDevice } from '../../../client/src/index.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';
import { ensureConsoleBuilt, launchChromium, screenshot, seriousViolations } from './browser.ts';

/** CONTRACT §10 asks for changes within 2 s; the wait allows for a machine busy with other tests. */
const LIVE_MS = 6000;

let browser: Browser;
beforeAll(async () => {
  ensureConsoleBuilt();
  browser = await launchChromium();
}, 180_000);
afterAll(async () => browser?.close());

describe.each(backends)('the console in Chromium (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  let context: BrowserContext;
  let page: Page;
  const devices: LivelineDevice[] = [];

  beforeAll(async () => {
    server = await startTestServer(backend);
    base = server.url;
    tenant = await createTenant(base, server.adminToken, { name: 'Browser studio' });
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

  /** A headset: the device SDK with a session (in `cohort`), connected to its realtime channel. */
  async function headset(playerId: string, cohort?: string, model = 'Quest 3') {
    const token = await deviceToken(base, tenant.token, playerId, cohort);
    const device = new LivelineDevice({ baseUrl: base, token, flushIntervalMs: 50 });
    devices.push(device);
    const session = await device.startSession({ device: { model, os: 'Android 14' } });
    await device.connect();
    return { device, sessionId: session.sessionId };
  }

  async function signIn(clientId = tenant.clientId, secret = tenant.clientSecret) {
    await page.goto(`${base}/console`);
    await page.getByLabel('Client ID').fill(clientId);
    await page.getByLabel('Client secret').fill(secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  const sessionsTable = () => page.getByRole('table', { name: 'Live sessions' });
  const row = (playerId: string) =>
    sessionsTable()
      .getByRole('row')
      .filter({ has: page.getByRole('rowheader', { name: playerId, exact: true }) });

  it('refuses a wrong client secret with the reason in an alert, then signs in', async () => {
    await signIn(tenant.clientId, 'lls_not-the-secret');
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.innerText()).toContain('Sign-in refused: Unknown client or wrong secret.');
    expect(await sessionsTable().count()).toBe(0);
    await screenshot(page, `${backend}-console-sign-in-refused`);

    await page.getByLabel('Client secret').fill(tenant.clientSecret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await sessionsTable().waitFor();
    // The token is the tab's: a reload keeps the sign-in, and nothing of it is in localStorage.
    await page.reload();
    await sessionsTable().waitFor();
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(await page.evaluate(() => JSON.stringify(sessionStorage))).not.toContain(tenant.clientSecret);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Client ID').waitFor();
  });

  it("signs an operator in with the admin token and a tenant; signing out deletes the console's client", async () => {
    await page.goto(`${base}/console`);
    await page.getByLabel('Admin token').fill('not-the-admin-token-at-all');
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('alert').waitFor();
    expect(await page.getByRole('alert').innerText()).not.toBe('');

    await page.getByLabel('Admin token').fill(server.adminToken);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page
      .getByLabel('Tenant')
      .selectOption({ label: `Browser studio (${tenant.tenantId.slice(0, 8)})` });
    await page.getByRole('button', { name: 'Open tenant' }).click();
    await sessionsTable().waitFor();
    expect(await page.getByText('Operator · Browser studio').count()).toBe(1);

    const clients = async () => {
      const res = await call<{ clients: { name: string | null; revokedAt: number | null }[] }>(
        base,
        'GET',
        `/admin/v1/tenants/${tenant.tenantId}/clients`,
        { token: server.adminToken },
      );
      return res.body.clients.filter((c) => c.name === 'liveline console (operator sign-in)' && !c.revokedAt);
    };
    expect(await clients()).toHaveLength(1);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Admin token').waitFor();
    await expect.poll(clients, { timeout: 5000 }).toHaveLength(0);
  });

  it('shows sessions live: new ones with their health, a cohort filter, ends without a reload', async () => {
    await signIn();
    await page.getByText(/No session was active within 5 minutes/).waitFor({ timeout: LIVE_MS });

    const a = await headset('player-a', 'class-a', 'Quest 3');
    const b = await headset('player-b', 'class-b', 'Pico 4');
    a.device.track({ eventType: 'Health', fps: 72, batteryLevel: 81 });
    await a.device.flush();
    await row('player-a').waitFor({ timeout: LIVE_MS });
    await row('player-b').waitFor({ timeout: LIVE_MS });

    const cells = row('player-a').getByRole('cell');
    await expect
      .poll(() => cells.allInnerTexts(), { timeout: LIVE_MS })
      .toEqual(['class-a', 'Quest 3', 'yes', 'idle', 'idle', '81 %', '72', expect.stringMatching(/s ago$/)]);
    // A later Health event replaces the figures.
    a.device.track({ eventType: 'Health', fps: 45, batteryLevel: 12 });
    await a.device.flush();
    await expect
      .poll(async () => (await cells.allInnerTexts()).slice(5, 7), { timeout: LIVE_MS })
      .toEqual(['12 %', '45']);
    await screenshot(page, `${backend}-console-live-sessions`);

    await page.getByLabel('Cohort').fill('class-b');
    await page.getByLabel('Cohort').press('Enter');
    // The filtered list has arrived once its count names the cohort.
    await page.getByText('1 session active within 5 minutes in cohort class-b').waitFor({ timeout: LIVE_MS });
    await row('player-b').waitFor();
    expect(await row('player-a').count()).toBe(0);
    await page.getByRole('button', { name: 'Show all cohorts' }).click();
    await row('player-a').waitFor({ timeout: LIVE_MS });

    await b.device.endSession();
    await expect.poll(() => row('player-b').count(), { timeout: LIVE_MS }).toBe(0);
    expect(await row('player-a').count()).toBe(1);
  });

  it('opens a session: events arrive newest first, errors stand out, the health chart draws', async () => {
    const h = await headset('player-events', 'class-e');
    h.device.track({ eventType: 'Health', fps: 72, batteryLevel: 90 });
    await h.device.flush();
    await signIn();
    await row('player-events').getByRole('link', { name: 'player-events' }).click();
    await page.getByRole('heading', { name: `Session ${h.sessionId}` }).waitFor();

    const events = page.getByRole('region', { name: 'Events' });
    await events.getByText('Health').first().waitFor({ timeout: LIVE_MS });
    const at = Date.now();
    h.device.track({
      eventType: 'Progression',
      progressionStatus: 'Complete',
      progression01: 'level-3',
      score: 1200,
      timestamp: at,
    });
    h.device.track({
      eventType: 'Error',
      severity: 'Critical',
      message: 'GPU device lost',
      timestamp: at + 5,
    });
    await h.device.flush();

    const first = events.getByRole('listitem').first();
    await expect.poll(() => first.innerText(), { timeout: LIVE_MS }).toContain('GPU device lost');
    expect(await first.innerText()).toContain('Critical');
    expect(await first.getAttribute('class')).toContain('sev-critical');
    const second = await events.getByRole('listitem').nth(1).innerText();
    expect(second).toContain('Progression');
    expect(second).toContain('level-3');

    // uPlot draws on a canvas; the caption says what it shows.
    expect(await page.locator('figure.chart canvas').count()).toBeGreaterThan(0);
    expect(await page.locator('figure.chart figcaption').innerText()).toContain('72 fps, battery 90 %');
    await screenshot(page, `${backend}-console-session`);
  });

  it('sends a text command, camera settings and custom variables; shows them acknowledged, and refusals', async () => {
    const h = await headset('player-commands');
    const texts: string[] = [];
    const cameras: unknown[] = [];
    const custom: unknown[] = [];
    h.device.onText((text) => void texts.push(text));
    h.device.onCamera((controls) => void cameras.push(controls));
    h.device.onCommand((name, variables) => void custom.push({ name, variables }));
    await signIn();
    await page.goto(`${base}/console#/sessions/${h.sessionId}`);
    const commands = page.getByRole('table', { name: 'Commands' });
    await commands.waitFor();

    await page.getByLabel('Message').fill('Welcome to the demo!');
    await page.getByRole('button', { name: 'Send text' }).click();
    const textRow = commands.getByRole('row').filter({ has: page.getByRole('rowheader', { name: 'text' }) });
    await expect.poll(() => textRow.innerText(), { timeout: LIVE_MS }).toContain('acknowledged');
    expect(await textRow.innerText()).toContain('Welcome to the demo!');
    expect(texts).toEqual(['Welcome to the demo!']);

    await page.getByLabel('Field of view (1–179)').fill('90');
    await page.getByLabel('Camera view').selectOption({ label: 'ThirdPerson' });
    await page.getByRole('button', { name: 'Send camera settings' }).click();
    const cameraRow = commands
      .getByRole('row')
      .filter({ has: page.getByRole('rowheader', { name: 'camera' }) });
    await expect.poll(() => cameraRow.innerText(), { timeout: LIVE_MS }).toContain('acknowledged');
    expect(cameras).toEqual([{ fieldOfView: 90, cameraView: 1 }]);

    await page.getByLabel('Command name').fill('difficulty');
    await page.getByLabel('Variable 1 name').fill('level');
    await page.getByLabel('Variable 1 type').selectOption('int');
    await page.getByLabel('Variable 1 value').fill('abc');
    await page.getByRole('button', { name: 'Send command' }).click();
    // The server's refusal, as its problem detail and field errors: nothing was sent.
    const refusal = page.getByRole('alert');
    await refusal.waitFor();
    expect(await refusal.innerText()).toMatch(/data\.values\[0\]/);
    await page.getByLabel('Variable 1 value').fill('3');
    await page.getByRole('button', { name: 'Add variable' }).click();
    await page.getByLabel('Variable 2 name').fill('hardcore');
    await page.getByLabel('Variable 2 type').selectOption('bool');
    await page.getByLabel('Variable 2 value').fill('true');
    await page.getByRole('button', { name: 'Send command' }).click();
    const customRow = commands
      .getByRole('row')
      .filter({ has: page.getByRole('rowheader', { name: 'difficulty' }) });
    await expect.poll(() => customRow.innerText(), { timeout: LIVE_MS }).toContain('acknowledged');
    expect(await page.getByRole('alert').count()).toBe(0);
    expect(custom).toEqual([{ name: 'difficulty', variables: { level: 3, hardcore: true } }]);
    expect(await commands.getByRole('row').count()).toBe(4); // the header and three commands
  });

  it('starts and stops a stream (and a recording) from the page, its buttons following the state', async () => {
    const h = await headset('player-stream');
    const started: unknown[] = [];
    let stopped = 0;
    h.device.onStreamStart((request) => void started.push(request));
    h.device.onStreamStop(() => void stopped++);
    h.device.onRecordStart(() => undefined);
    h.device.onRecordStop(() => undefined);
    await signIn();
    await page.goto(`${base}/console#/sessions/${h.sessionId}`);

    const button = (name: string) => page.getByRole('button', { name, exact: true });
    const enabled = async () =>
      Object.fromEntries(
        await Promise.all(
          ['Start stream', 'Stop stream', 'Start recording', 'Stop recording'].map(
            async (name) => [name, await button(name).isEnabled()] as const,
          ),
        ),
      );
    await button('Start stream').waitFor();
    await expect.poll(enabled, { timeout: LIVE_MS }).toEqual({
      'Start stream': true,
      'Stop stream': false,
      'Start recording': false,
      'Stop recording': false,
    });

    await page.getByLabel('Resolution').selectOption({ label: '720p' });
    await page.getByLabel('Aspect ratio').selectOption({ label: '9:16' });
    await button('Start stream').click();
    await expect.poll(enabled, { timeout: LIVE_MS }).toEqual({
      'Start stream': false,
      'Stop stream': true,
      'Start recording': true,
      'Stop recording': false,
    });
    expect(started).toEqual([expect.objectContaining({ resolution: 1, aspectratio: 1 })]);
    const events = page.getByRole('region', { name: 'Events' });
    await events.getByText('StreamStarted').waitFor({ timeout: LIVE_MS });

    await button('Start recording').click();
    await expect.poll(enabled, { timeout: LIVE_MS }).toEqual({
      'Start stream': false,
      'Stop stream': true,
      'Start recording': false,
      'Stop recording': true,
    });
    await screenshot(page, `${backend}-console-streaming`);

    await button('Stop stream').click();
    await expect.poll(enabled, { timeout: LIVE_MS }).toEqual({
      'Start stream': true,
      'Stop stream': false,
      'Start recording': false,
      'Stop recording': false,
    });
    expect(stopped).toBe(1);
    await events.getByText('StreamStopped').waitFor({ timeout: LIVE_MS });
    const session = await call<{ stream: { state: string }; recording: { state: string } }>(
      base,
      'GET',
      `/sessions/${h.sessionId}`,
      { token: tenant.token },
    );
    expect(session.body.stream.state).toBe('idle');
    expect(session.body.recording.state).toBe('idle');
    const commands = page.getByRole('table', { name: 'Commands' });
    for (const name of ['stream.start', 'record.start', 'stream.stop']) {
      const r = commands.getByRole('row').filter({ has: page.getByRole('rowheader', { name, exact: true }) });
      await expect.poll(() => r.innerText(), { timeout: LIVE_MS }).toContain('acknowledged');
    }
  });

  it('shows an API error as its problem detail, never a blank page', async () => {
    await signIn();
    await sessionsTable().waitFor();
    await page.goto(`${base}/console#/sessions/01a20000-0000-7000-8000-000000000000`);
    const alert = page.getByRole('alert').first();
    await alert.waitFor({ timeout: LIVE_MS });
    expect(await alert.innerText()).toMatch(/session/i);
    expect(await page.getByRole('link', { name: '← Live sessions' }).count()).toBe(1);
  });

  it('has no serious or critical accessibility violations (axe-core) on its pages', async () => {
    const h = await headset('player-axe', 'class-x');
    h.device.track({ eventType: 'Health', fps: 60, batteryLevel: 50 });
    h.device.track({ eventType: 'Error', severity: 'Warning', message: 'Low memory' });
    await h.device.flush();
    await page.goto(`${base}/console`);
    await page.getByLabel('Client ID').waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    await signIn();
    await row('player-axe').waitFor({ timeout: LIVE_MS });
    expect(await seriousViolations(page)).toEqual([]);

    await row('player-axe').getByRole('link', { name: 'player-axe' }).click();
    await page.getByRole('region', { name: 'Events' }).getByText('Low memory').waitFor({ timeout: LIVE_MS });
    expect(await seriousViolations(page)).toEqual([]);

    for (const tab of ['Campaigns', 'Webhooks', 'Credentials']) {
      await page.getByRole('link', { name: tab, exact: true }).click();
      await page.getByRole('heading', { name: tab, level: 1 }).waitFor();
      expect(await seriousViolations(page)).toEqual([]);
    }
  }, 90_000); // axe-core on five pages: 23–31 s when the other browser tests run at the same time
});
