/**
 * The console's management pages (CONTRACT §10: campaigns, webhooks, credentials) in a real browser:
 * Debian's Chromium driven by playwright-core against a real server, a real webhook receiver, and
 * players streaming through the device routes (the server's clock moved on instead of waiting).
 * Everything is found by accessible names; what the page did is checked again at the API.
 */
import { verifyWebhook } from '@liveline/tenant';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Answer, call, createTenant, type TenantFixture } from '../helpers/api.ts';
import { greyJpeg } from '../helpers/jpeg.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { GOOD_IMAGE, LONG_CLOCK_ENV, MINUTE } from '../helpers/rewards.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';
import { ensureConsoleBuilt, launchChromium, screenshot, seriousViolations } from './browser.ts';

type Json = Record<string, unknown>;

/** Lists poll every 1.5 s (deliveries) to 10 s (campaigns); the wait allows for a busy machine. */
const LIVE_MS = 8000;
/** The progress table reads again every 5 s. */
const PROGRESS_MS = 12_000;

/** Real time, plus however far the test has moved it on. */
function offsetClock() {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    advance(ms: number) {
      offset += ms;
    },
  };
}

const jpeg = (name: string, size = 200) => ({ name, mimeType: 'image/jpeg', buffer: greyJpeg(size, size) });

let browser: Browser;
beforeAll(async () => {
  ensureConsoleBuilt();
  browser = await launchChromium();
}, 180_000);
afterAll(async () => browser?.close());

describe.each(backends)('the console’s campaigns, webhooks and credentials in Chromium (%s)', (backend) => {
  const clock = offsetClock();
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  let context: BrowserContext;
  let page: Page;

  const api = <T = Json>(method: string, path: string, json?: unknown) =>
    call<T>(base, method, path, { token: tenant.token, json });
  const admin = <T = Json>(method: string, path: string, json?: unknown) =>
    call<T>(base, method, path, { token: server.adminToken, json });

  beforeAll(async () => {
    server = await startTestServer(
      backend,
      // A failed delivery waits an hour for its next attempt: the page's Retry is what sends it again.
      { ...LONG_CLOCK_ENV, LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true', LIVELINE_WEBHOOK_RETRY_SCHEDULE: '3600' },
      { clock },
    );
    base = server.url;
    tenant = await createTenant(base, server.adminToken, { name: 'Manage studio' });
  });
  afterAll(async () => server?.close());
  beforeEach(async () => {
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
  });
  afterEach(async () => context?.close());

  async function signIn(clientId = tenant.clientId, secret = tenant.clientSecret) {
    await page.goto(`${base}/console`);
    await page.getByLabel('Client ID').fill(clientId);
    await page.getByLabel('Client secret').fill(secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('table', { name: 'Live sessions' }).waitFor();
  }

  async function signInAsOperator() {
    await page.goto(`${base}/console`);
    await page.getByLabel('Admin token').fill(server.adminToken);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByLabel('Tenant').selectOption({ label: `Manage studio (${tenant.tenantId.slice(0, 8)})` });
    await page.getByRole('button', { name: 'Open tenant' }).click();
    await page.getByRole('table', { name: 'Live sessions' }).waitFor();
  }

  async function open(tab: 'Campaigns' | 'Webhooks' | 'Credentials') {
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: tab, exact: true })
      .click();
    await page.getByRole('heading', { name: tab, level: 1 }).waitFor();
  }

  const rowOf = (table: string, header: string) =>
    page
      .getByRole('table', { name: table, exact: true })
      .getByRole('row')
      .filter({ has: page.getByRole('rowheader', { name: header, exact: true }) });

  async function campaignViaApi(name: string) {
    const created = await api<{ campaignId: string; campaignSecret: string }>('POST', '/campaigns', {
      name,
      redemption: { method: 'displayCode', instructionsTemplate: 'Show {code} to collect {rewardTitle}.' },
    });
    expect(created.status, created.text).toBe(201);
    return created.body;
  }

  async function tokenAnswer(clientId: string, clientSecret: string): Promise<Answer<Json>> {
    const form = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    });
    const res = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: JSON.parse(text) as Json, text };
  }

  it('creates a campaign, then a challenge with its image uploaded; a wrong image is refused with its detail', async () => {
    await signIn();
    await open('Campaigns');
    await page.getByText('No campaigns yet.').waitFor({ timeout: LIVE_MS });

    await page.getByLabel('Campaign name', { exact: true }).fill('Spring league');
    await page.getByLabel('Time zone', { exact: true }).fill('Europe/Berlin');
    await page.getByLabel('Redemption').selectOption('displayCode');
    await page.getByLabel('Instructions', { exact: true }).fill('Show {code} at the desk for {rewardTitle}.');
    await page.getByRole('button', { name: 'Create campaign' }).click();
    const secretField = page.getByLabel('Campaign secret', { exact: true });
    await secretField.waitFor();
    const campaignSecret = await secretField.inputValue();
    expect(campaignSecret).toMatch(/^lcs_/);
    await rowOf('Campaigns', 'Spring league').waitFor({ timeout: LIVE_MS });
    expect(await rowOf('Campaigns', 'Spring league').innerText()).toContain('running');

    const list = await api<{ campaigns: (Json & { campaignId: string })[] }>('GET', '/campaigns');
    expect(list.body.campaigns).toHaveLength(1);
    const campaign = list.body.campaigns[0];
    expect(campaign).toMatchObject({
      name: 'Spring league',
      timezone: 'Europe/Berlin',
      startsAt: null,
      endsAt: null,
      redemption: {
        method: 'displayCode',
        instructionsTemplate: 'Show {code} at the desk for {rewardTitle}.',
      },
    });
    // The secret shown is the campaign's: the verification route knows it (no such code, not a bad secret).
    const probe = await call(base, 'POST', '/campaigns/verifyrewardcode', {
      json: { campaignSecret, verificationCode: 'AAAA-AAAA' },
    });
    expect(probe.status, probe.text).toBe(404);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    expect(await secretField.count()).toBe(0);

    await rowOf('Campaigns', 'Spring league').getByRole('link', { name: 'Spring league' }).click();
    await page.getByRole('heading', { name: 'Campaign Spring league', level: 1 }).waitFor();
    await page.getByText('No challenges yet.').waitFor();

    // A 100×100 JPEG: the server's refusal is shown as its detail, and nothing is created.
    await page.getByLabel('Reward code', { exact: true }).fill('VISOR');
    await page.getByLabel('Reward title', { exact: true }).fill('Golden visor');
    await page.getByLabel('Reward requirement', { exact: true }).fill('Stream for 30 minutes in total');
    await page.getByLabel('Rule').selectOption({ label: 'Total mins streamed' });
    await page.getByLabel('Target', { exact: true }).fill('30');
    await page
      .getByLabel('Reward image (JPEG, 200×200)', { exact: true })
      .setInputFiles(jpeg('small.jpg', 100));
    await page.getByRole('button', { name: 'Add challenge' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.innerText()).toContain('The reward image is not usable');
    expect(await alert.innerText()).toContain('200');
    const none = await api<{ challenges: unknown[] }>('GET', `/campaigns/${campaign.campaignId}/challenges`);
    expect(none.body.challenges).toEqual([]);

    await page.getByLabel('Reward image (JPEG, 200×200)', { exact: true }).setInputFiles(jpeg('visor.jpg'));
    await page.getByRole('button', { name: 'Add challenge' }).click();
    const row = rowOf('Challenges', 'Golden visor');
    await row.waitFor({ timeout: LIVE_MS });
    expect(await page.getByRole('alert').count()).toBe(0);
    expect(await row.innerText()).toMatch(
      /VISOR\s+Stream for 30 minutes in total\s+Total mins streamed\s+30 minutes/,
    );
    // The image is the one uploaded, shown from the server with the console's token.
    const image = row.getByRole('img', { name: 'Reward: Golden visor' });
    await expect
      .poll(() => image.evaluate((img: HTMLImageElement) => img.naturalWidth), { timeout: LIVE_MS })
      .toBe(200);
    const challenges = await api<{ challenges: { challengeId: string; rule: Json }[] }>(
      'GET',
      `/campaigns/${campaign.campaignId}/challenges`,
    );
    expect(challenges.body.challenges).toHaveLength(1);
    expect(challenges.body.challenges[0].rule).toEqual({ type: 'totalMinutes', target: 30 });
    const stored = await fetch(
      `${base}/campaigns/${campaign.campaignId}/challenges/${challenges.body.challenges[0].challengeId}/image`,
      { headers: { authorization: `Bearer ${tenant.token}` } },
    );
    expect(Buffer.from(await stored.arrayBuffer()).equals(greyJpeg(200, 200))).toBe(true);
    // The form was emptied for the next one.
    expect(await page.getByLabel('Reward code', { exact: true }).inputValue()).toBe('');

    await screenshot(page, `${backend}-console-campaign`);
    expect(await seriousViolations(page)).toEqual([]);

    // Edited: only what changed is sent (the end set here; name, zone and redemption left as they were).
    await page.getByRole('button', { name: 'Edit campaign' }).click();
    await page.getByLabel('Campaign name', { exact: true }).fill('Spring league 2026');
    const endsAt = new Date(Date.now() + 7 * 86_400_000);
    endsAt.setSeconds(0, 0);
    const pad = (n: number) => String(n).padStart(2, '0');
    await page
      .getByLabel('Ends', { exact: true })
      .fill(
        `${endsAt.getFullYear()}-${pad(endsAt.getMonth() + 1)}-${pad(endsAt.getDate())}T${pad(endsAt.getHours())}:${pad(endsAt.getMinutes())}`,
      );
    await page.getByRole('button', { name: 'Save campaign' }).click();
    await page
      .getByRole('heading', { name: 'Campaign Spring league 2026', level: 1 })
      .waitFor({ timeout: LIVE_MS });
    const edited = await api<Json>('GET', `/campaigns/${campaign.campaignId}`);
    expect(edited.body).toMatchObject({
      name: 'Spring league 2026',
      timezone: 'Europe/Berlin',
      startsAt: null,
      endsAt: endsAt.getTime(),
      redemption: campaign.redemption,
    });

    await page.getByRole('link', { name: '← Campaigns' }).click();
    await rowOf('Campaigns', 'Spring league 2026').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
  });

  it('imports challenges from the template CSV with their images; a bad row rejects the whole import', async () => {
    const campaign = await campaignViaApi('Imported');
    await signIn();
    await page.goto(`${base}/console#/campaigns/${campaign.campaignId}`);
    await page.getByRole('heading', { name: 'Campaign Imported', level: 1 }).waitFor();

    const header = 'Reward Code,Reward Title,Reward Requirement,Reward Image,Reward Rules,Target';
    const csv = (rows: string[]) => ({
      name: 'challenges.csv',
      mimeType: 'text/csv',
      buffer: Buffer.from(`${header}\r\n${rows.join('\r\n')}\r\n`),
    });
    const rows = [
      'DAYS-3,Three days,Stream on 3 different days,days.jpg,Unique days streamed on,3',
      'STREAMS-5,Five streams,Stream 5 times,streams.jpg,Stream session count,5',
    ];
    await page
      .getByLabel('Template (CSV)', { exact: true })
      .setInputFiles(csv([rows[0], rows[1].replace('Stream session count', 'Minutes watched')]));
    await page
      .getByLabel('Images (JPEG, 200×200)', { exact: true })
      .setInputFiles([jpeg('days.jpg'), jpeg('streams.jpg')]);
    await page.getByRole('button', { name: 'Import challenges' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.innerText()).toContain('rows[1].Reward Rules');
    const before = await api<{ challenges: unknown[] }>(
      'GET',
      `/campaigns/${campaign.campaignId}/challenges`,
    );
    expect(before.body.challenges).toEqual([]);

    await page.getByLabel('Template (CSV)', { exact: true }).setInputFiles(csv(rows));
    await page
      .getByLabel('Images (JPEG, 200×200)', { exact: true })
      .setInputFiles([jpeg('days.jpg'), jpeg('streams.jpg')]);
    await page.getByRole('button', { name: 'Import challenges' }).click();
    await page.getByText('Imported 2 challenges.').waitFor({ timeout: LIVE_MS });
    expect(await page.getByRole('alert').count()).toBe(0);
    for (const [title, rule] of [
      ['Three days', 'Unique days streamed on'],
      ['Five streams', 'Stream session count'],
    ]) {
      const row = rowOf('Challenges', title);
      await row.waitFor({ timeout: LIVE_MS });
      expect(await row.innerText()).toContain(rule);
      const img = row.getByRole('img', { name: `Reward: ${title}` });
      await expect
        .poll(() => img.evaluate((i: HTMLImageElement) => i.naturalWidth), { timeout: LIVE_MS })
        .toBe(200);
    }
    const after = await api<{ challenges: { rewardCode: string; rule: Json }[] }>(
      'GET',
      `/campaigns/${campaign.campaignId}/challenges`,
    );
    expect(after.body.challenges.map((c) => [c.rewardCode, c.rule])).toEqual([
      ['DAYS-3', { type: 'uniqueDays', target: 3 }],
      ['STREAMS-5', { type: 'sessionCount', target: 5 }],
    ]);
    await screenshot(page, `${backend}-console-campaign-import`);
  });

  it("shows a player's progress, claim and verification, updating on its own", async () => {
    const campaign = await campaignViaApi('Progress');
    for (const [code, title, target] of [
      ['ONE', 'First minute', 1],
      ['HUNDRED', 'Hundred minutes', 100],
    ] as const) {
      const res = await api('POST', `/campaigns/${campaign.campaignId}/challenges`, {
        rewardCode: code,
        rewardTitle: title,
        rewardRequirement: `Stream ${target} minutes`,
        rewardImage: GOOD_IMAGE,
        rule: { type: 'totalMinutes', target },
      });
      expect(res.status, res.text).toBe(201);
    }
    const minted = await api<{ token: string }>('POST', '/client-tokens', { playerId: 'player-progress' });
    const token = minted.body.token;
    const session = await call<{ sessionId: string }>(base, 'POST', '/client/v1/sessions', {
      token,
      json: {},
    });
    const streamPath = `/client/v1/sessions/${session.body.sessionId}/stream`;
    expect(
      (await call(base, 'POST', `${streamPath}/start`, { token, json: { resolution: 1, aspectratio: 0 } }))
        .status,
    ).toBe(200);
    clock.advance(3 * MINUTE);
    expect((await call(base, 'POST', `${streamPath}/stop`, { token, json: {} })).status).toBe(200);

    await signIn();
    await page.goto(`${base}/console#/campaigns/${campaign.campaignId}`);
    await page.getByRole('heading', { name: 'Campaign Progress', level: 1 }).waitFor();
    await page.getByLabel('Player ID', { exact: true }).fill('player-progress');
    await page.getByRole('button', { name: 'Show progress' }).click();
    const table = 'Progress of player-progress';
    const first = rowOf(table, 'First minute');
    await first.waitFor({ timeout: LIVE_MS });
    expect(await first.innerText()).toMatch(/3 \/ 1 minute\s+complete\s+—\s+—/);
    expect(await rowOf(table, 'Hundred minutes').innerText()).toMatch(/3 \/ 100 minutes\s+in progress/);
    expect(await rowOf(table, 'Hundred minutes').getByRole('progressbar').getAttribute('aria-valuenow')).toBe(
      '3',
    );

    // The player claims in the game: the table shows the claim without a reload.
    const challenges = await call<{ challenges: { challengeId: string; rewardCode: string }[] }>(
      base,
      'GET',
      '/client/v1/challenges',
      { token },
    );
    const one = challenges.body.challenges.find((c) => c.rewardCode === 'ONE')!;
    const claim = await call<{ claimId: number; displayCode: string }>(
      base,
      'POST',
      `/client/v1/challenges/${one.challengeId}/claim`,
      { token },
    );
    expect(claim.status, claim.text).toBe(201);
    await expect
      .poll(() => first.innerText(), { timeout: PROGRESS_MS })
      .toMatch(new RegExp(`claimed\\s+#${claim.body.claimId} on .+\\s+not verified`));

    // After a reload the page holds a plain token: a refused campaign secret (401) must not sign it out.
    await page.reload();
    await page.getByRole('textbox', { name: 'Campaign secret' }).fill('lcs_not-the-secret');
    await page.getByLabel('Display or achievement code', { exact: true }).fill(claim.body.displayCode);
    await page.getByRole('button', { name: 'Verify code' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.innerText()).toMatch(/secret/i);
    expect(await page.getByRole('button', { name: 'Sign out' }).count()).toBe(1);

    await page.getByRole('textbox', { name: 'Campaign secret' }).fill(campaign.campaignSecret);
    await page
      .getByLabel('Display or achievement code', { exact: true })
      .fill(claim.body.displayCode.toLowerCase());
    await page.getByRole('button', { name: 'Verify code' }).click();
    await page
      .getByText(`Verified: claim #${claim.body.claimId}, reward ONE, player player-progress`)
      .waitFor({ timeout: LIVE_MS });
    await page.getByLabel('Player ID', { exact: true }).fill('player-progress');
    await page.getByRole('button', { name: 'Show progress' }).click();
    await expect
      .poll(() => first.innerText(), { timeout: PROGRESS_MS })
      .toMatch(/claimed\s+#\d+ on .+\s+verified /);
    await page.getByRole('button', { name: 'Verify code' }).click();
    await page.getByText(`Already verified: claim #${claim.body.claimId}`).waitFor({ timeout: LIVE_MS });

    await screenshot(page, `${backend}-console-player-progress`);
    expect(await seriousViolations(page)).toEqual([]);
  });

  it('creates a webhook endpoint, shows its test send delivered in the log, retries a failure, replays, disables and deletes it', async () => {
    const receiver = await startReceiver();
    try {
      await signIn();
      await open('Webhooks');
      await page.getByText('No webhook endpoints yet.').waitFor({ timeout: LIVE_MS });

      await page.getByLabel('Endpoint URL', { exact: true }).fill(receiver.url);
      await page.getByLabel('Description', { exact: true }).fill('Ops receiver');
      await page.getByRole('checkbox', { name: /^reward\.claimed/ }).check();
      await page.getByRole('checkbox', { name: /^reward\.verified/ }).check();
      await page.getByRole('button', { name: 'Create endpoint' }).click();
      const secretField = page.getByLabel('Signing secret', { exact: true });
      await secretField.waitFor();
      const secret = await secretField.inputValue();
      expect(secret).toMatch(/^whsec_/);
      const listed = await api<{ webhooks: (Json & { webhookId: string })[] }>('GET', '/webhooks');
      expect(listed.body.webhooks).toHaveLength(1);
      expect(listed.body.webhooks[0]).toMatchObject({
        url: receiver.url,
        description: 'Ops receiver',
        types: ['reward.claimed', 'reward.verified'],
        eventTypes: null,
        enabled: true,
      });
      const webhookId = listed.body.webhooks[0].webhookId;
      await rowOf('Webhook endpoints', receiver.url).waitFor({ timeout: LIVE_MS });
      expect(await seriousViolations(page)).toEqual([]);

      await page.getByRole('link', { name: 'Open the endpoint' }).click();
      await page.getByRole('heading', { name: `Endpoint ${receiver.url}`, level: 1 }).waitFor();
      await page.getByText('No deliveries yet.').waitFor({ timeout: LIVE_MS });

      // A test send: delivered, its attempt in the log; the receiver checks it with the secret shown.
      await page.getByRole('button', { name: 'Send test' }).click();
      const deliveries = page.getByRole('table', { name: 'Deliveries' });
      const tests = deliveries
        .getByRole('row')
        .filter({ has: page.getByRole('rowheader', { name: 'webhook.test' }) });
      await expect
        .poll(() => tests.first().innerText(), { timeout: LIVE_MS })
        .toMatch(/delivered\s+1 attempt, last 200 in \d+ ms/);
      expect(receiver.received).toHaveLength(1);
      const got = receiver.received[0];
      expect(verifyWebhook(got.body, got.headers, secret).type).toBe('webhook.test');
      const deliveryId = got.id;
      expect(await tests.first().innerText()).toContain(deliveryId);

      // A failing receiver: the attempt's 500 shows, the delivery waits (an hour); Retry sends it now.
      receiver.setBehaviour(() => 500);
      await page.getByRole('button', { name: 'Send test' }).click();
      await expect.poll(() => tests.count(), { timeout: LIVE_MS }).toBe(2);
      const failing = tests.first();
      await expect
        .poll(() => failing.innerText(), { timeout: LIVE_MS })
        .toMatch(/pending[\s\S]*1 attempt, last 500 in \d+ ms/);
      receiver.setBehaviour(() => 200);
      await failing.getByRole('button', { name: 'Retry' }).click();
      await expect
        .poll(() => failing.innerText(), { timeout: LIVE_MS })
        .toMatch(/delivered\s+2 attempts, last 200 in \d+ ms/);
      // The attempts, each with its status, open under the row.
      await failing.getByText('2 attempts').click();
      const attempts = failing.getByRole('listitem');
      expect(await attempts.count()).toBe(2);
      expect(await attempts.nth(0).innerText()).toMatch(/: 500, \d+ ms/);
      expect(await attempts.nth(1).innerText()).toMatch(/: 200, \d+ ms/);
      await screenshot(page, `${backend}-console-webhook`);
      expect(await seriousViolations(page)).toEqual([]);

      // Replay: everything since an hour ago goes out again.
      const before = receiver.received.length;
      await page.getByRole('button', { name: 'Replay deliveries' }).click();
      await page.getByText('2 deliveries queued again.').waitFor({ timeout: LIVE_MS });
      await expect.poll(() => receiver.received.length, { timeout: LIVE_MS }).toBe(before + 2);

      // Settings: a new description; then disabled (no test sends) and enabled again.
      await page.getByRole('button', { name: 'Edit endpoint' }).click();
      await page.getByLabel('Description', { exact: true }).fill('Ops receiver (primary)');
      await page.getByRole('checkbox', { name: /^reward\.verified/ }).uncheck();
      await page.getByRole('button', { name: 'Save endpoint' }).click();
      await page.getByText('Endpoint saved.').waitFor();
      const saved = await api<Json>('GET', `/webhooks/${webhookId}`);
      expect(saved.body).toMatchObject({ description: 'Ops receiver (primary)', types: ['reward.claimed'] });

      await page.getByRole('button', { name: 'Disable endpoint' }).click();
      await page.getByText('disabled (by hand)').first().waitFor({ timeout: LIVE_MS });
      expect(await page.getByRole('button', { name: 'Send test' }).isDisabled()).toBe(true);
      expect((await api<Json>('GET', `/webhooks/${webhookId}`)).body).toMatchObject({
        enabled: false,
        disabledReason: 'manual',
      });
      await page.getByRole('button', { name: 'Enable endpoint' }).click();
      await expect
        .poll(() => page.getByRole('button', { name: 'Send test' }).isEnabled(), { timeout: LIVE_MS })
        .toBe(true);

      await page.getByRole('button', { name: 'Delete endpoint' }).click();
      await page.getByRole('button', { name: 'Delete now' }).click();
      await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();
      await page.getByText('No webhook endpoints yet.').waitFor({ timeout: LIVE_MS });
      expect((await api('GET', `/webhooks/${webhookId}`)).status).toBe(404);
    } finally {
      await receiver.close();
    }
  });

  it('lets the operator list clients with scopes, create one (secret shown once), rotate its secret and delete it', async () => {
    await signInAsOperator();
    await open('Credentials');
    const clients = page.getByRole('table', { name: 'Clients', exact: true });
    await clients.waitFor();
    // The tenant's own client (no name, every scope) and this console's sign-in.
    const fixture = clients.getByRole('row').filter({ hasText: tenant.clientId });
    expect(await fixture.innerText()).toContain('campaigns:manage');
    expect(
      await rowOf('Clients', "liveline console (operator sign-in) — this console's sign-in").count(),
    ).toBe(1);

    await page.getByLabel('Client name', { exact: true }).fill('Reporting backend');
    for (const scope of [
      'commands:send',
      'events:write',
      'tokens:issue',
      'webhooks:manage',
      'campaigns:manage',
      'players:manage',
    ]) {
      await page.getByRole('checkbox', { name: new RegExp(`^${scope}`) }).uncheck();
    }
    await page.getByRole('button', { name: 'Create client' }).click();
    const secretField = page.getByLabel('Client secret', { exact: true });
    await secretField.waitFor();
    const secret1 = await secretField.inputValue();
    const row = rowOf('Clients', 'Reporting backend');
    await row.waitFor({ timeout: LIVE_MS });
    expect(await row.getByRole('cell').nth(1).innerText()).toBe('sessions:read');
    const clientId = (await row.getByRole('cell').first().innerText()).trim();
    const issued = await tokenAnswer(clientId, secret1);
    expect(issued.status, issued.text).toBe(200);
    expect(issued.body.scope).toBe('sessions:read');
    await page.getByRole('button', { name: 'I have stored it' }).click();

    // Rotated: the new secret shown once; the old one keeps working for 24 h.
    await row.getByRole('button', { name: 'Rotate secret' }).click();
    await row.getByRole('button', { name: 'Rotate now' }).click();
    const rotatedField = page.getByLabel('New client secret', { exact: true });
    await rotatedField.waitFor();
    const secret2 = await rotatedField.inputValue();
    expect(secret2).not.toBe(secret1);
    expect(await page.getByText(/The old secret keeps working until/).count()).toBe(1);
    expect((await tokenAnswer(clientId, secret1)).status).toBe(200);
    expect((await tokenAnswer(clientId, secret2)).status).toBe(200);
    await expect.poll(() => row.innerText(), { timeout: LIVE_MS }).toContain('old secret works until');
    await page.getByRole('button', { name: 'I have stored it' }).click();

    // Rotated at once: the secret before stops working now.
    await row.getByRole('checkbox', { name: 'Old secret stops at once' }).check();
    await row.getByRole('button', { name: 'Rotate secret' }).click();
    await row.getByRole('button', { name: 'Rotate now' }).click();
    await page.getByText('The old secret stopped working at once.').waitFor();
    const secret3 = await page.getByLabel('New client secret', { exact: true }).inputValue();
    expect((await tokenAnswer(clientId, secret2)).status).toBe(401);
    expect((await tokenAnswer(clientId, secret1)).status).toBe(401);
    expect((await tokenAnswer(clientId, secret3)).status).toBe(200);
    await screenshot(page, `${backend}-console-credentials`);
    expect(await seriousViolations(page)).toEqual([]);

    await row.getByRole('button', { name: 'Delete', exact: true }).click();
    await row.getByRole('button', { name: 'Delete client' }).click();
    await expect.poll(() => row.count(), { timeout: LIVE_MS }).toBe(0);
    expect((await tokenAnswer(clientId, secret3)).status).toBe(401);
    const stored = await admin<{ clients: { clientId: string; revokedAt: number | null }[] }>(
      'GET',
      `/admin/v1/tenants/${tenant.tenantId}/clients`,
    );
    expect(stored.body.clients.find((c) => c.clientId === clientId)?.revokedAt).toEqual(expect.any(Number));
    // Deleted clients stay listed on demand.
    await page.getByRole('checkbox', { name: /Show deleted clients/ }).check();
    await expect.poll(() => row.innerText(), { timeout: LIVE_MS }).toContain('deleted');
  });

  it("rotates a client's secret by its ID when signed in with a client (the tenant's own route)", async () => {
    const other = await admin<{ clientId: string; clientSecret: string }>(
      'POST',
      `/admin/v1/tenants/${tenant.tenantId}/clients`,
      { name: 'Game backend' },
    );
    expect(other.status, other.text).toBe(201);
    await signIn();
    await open('Credentials');
    await page.getByText("Listing, creating and deleting clients is the operator's.").waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    await page.getByLabel('Client ID').fill('01a20000-0000-7000-8000-000000000000');
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await page.getByRole('alert').waitFor();
    expect(await page.getByRole('alert').innerText()).toMatch(/client/i);

    await page.getByLabel('Client ID').fill(other.body.clientId);
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const field = page.getByLabel('New client secret', { exact: true });
    await field.waitFor();
    const rotated = await field.inputValue();
    expect(await page.getByRole('alert').count()).toBe(0);
    expect((await tokenAnswer(other.body.clientId, rotated)).status).toBe(200);
    expect((await tokenAnswer(other.body.clientId, other.body.clientSecret)).status).toBe(200);
    await screenshot(page, `${backend}-console-credentials-client`);
  });
});
