/**
 * The players' viewer page (CONTRACT §10) in a real browser: Debian's Chromium driven by
 * playwright-core against a real server. A player streams (through the device routes, with the
 * server's clock moved on instead of waiting), watches the progress move without a reload, claims,
 * and sees the redemption of each of the three methods; the codes shown verify at the tenant's API.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { call, createTenant, type TenantFixture } from '../helpers/api.ts';
import { GOOD_IMAGE, LONG_CLOCK_ENV, MINUTE } from '../helpers/rewards.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';
import { ensureConsoleBuilt, launchChromium, screenshot, seriousViolations } from './browser.ts';

type Json = Record<string, unknown>;

/** The page reads progress again every 10 s (CONTRACT §10: within 15 s). */
const REFRESH_WAIT_MS = 15_000;

/** Real time, plus however far the test has moved it on: pages and sockets see a clock that runs. */
function offsetClock() {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    advance(ms: number) {
      offset += ms;
    },
  };
}

let browser: Browser;
beforeAll(async () => {
  ensureConsoleBuilt();
  browser = await launchChromium();
}, 180_000);
afterAll(async () => browser?.close());

describe.each(backends)('the viewer page in Chromium (%s)', (backend) => {
  const clock = offsetClock();
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  let context: BrowserContext;
  let page: Page;
  const secrets: Record<string, string> = {};

  const api = <T = Json>(method: string, path: string, json?: unknown) =>
    call<T>(base, method, path, { token: tenant.token, json });

  async function campaign(name: string, redemption: Json, challenges: [string, number][]) {
    const created = await api<{ campaignId: string; campaignSecret: string }>('POST', '/campaigns', {
      name,
      redemption,
    });
    expect(created.status, created.text).toBe(201);
    secrets[name] = created.body.campaignSecret;
    for (const [title, target] of challenges) {
      const res = await api('POST', `/campaigns/${created.body.campaignId}/challenges`, {
        rewardCode: title.toUpperCase().replace(/\W+/g, '-'),
        rewardTitle: title,
        rewardRequirement: `Stream for ${target} minute${target === 1 ? '' : 's'} in total`,
        rewardImage: GOOD_IMAGE,
        rule: { type: 'totalMinutes', target },
      });
      expect(res.status, res.text).toBe(201);
    }
  }

  beforeAll(async () => {
    server = await startTestServer(backend, LONG_CLOCK_ENV, { clock });
    base = server.url;
    tenant = await createTenant(base, server.adminToken, { name: 'Viewer studio' });
    await campaign(
      'Desk',
      {
        method: 'displayCode',
        instructionsTemplate: 'Show {code} at the front desk to collect {rewardTitle}.',
      },
      [
        ['Golden visor', 1],
        ['Marathon streamer', 100],
      ],
    );
    await campaign(
      'Web',
      { method: 'webUrl', urlTemplate: 'https://rewards.example/claim?a={achievement.code}&r={reward.code}' },
      [['Web badge', 1]],
    );
    await campaign(
      'App',
      {
        method: 'intent',
        form: 'startActivity',
        packageName: 'com.example.game',
        activityName: 'com.example.game.RewardActivity',
        action: 'android.intent.action.VIEW',
        dataUrlTemplate: 'https://game.example/reward?a={achievement.code}&r={reward.code}',
      },
      [['In-game skin', 1]],
    );
  });
  afterAll(async () => server?.close());
  beforeEach(async () => {
    // A phone-sized screen: the page is made for headset browsers and phones.
    context = await browser.newContext({
      viewport: { width: 412, height: 915 },
      hasTouch: true,
      isMobile: true,
    });
    page = await context.newPage();
  });
  afterEach(async () => context?.close());

  /** A player with a device token and a live session (as the game would have). */
  async function player(playerId: string) {
    const minted = await api<{ token: string }>('POST', '/client-tokens', { playerId });
    expect(minted.status, minted.text).toBe(200);
    const token = minted.body.token;
    const session = await call<{ sessionId: string }>(base, 'POST', '/client/v1/sessions', {
      token,
      json: {},
    });
    expect(session.status, session.text).toBe(201);
    const sessionId = session.body.sessionId;
    return {
      token,
      /** Streams for `ms` of server time (the clock moves; nothing waits). */
      async stream(ms: number) {
        const path = `/client/v1/sessions/${sessionId}/stream`;
        const start = await call(base, 'POST', `${path}/start`, {
          token,
          json: { resolution: 1, aspectratio: 0 },
        });
        expect(start.status, start.text).toBe(200);
        clock.advance(ms);
        const stop = await call(base, 'POST', `${path}/stop`, { token, json: {} });
        expect(stop.status, stop.text).toBe(200);
      },
    };
  }

  const article = (title: string) => page.getByRole('article', { name: title });
  const progress = (title: string) => article(title).getByRole('progressbar');

  it('shows each challenge with its image, requirement and progress; Claim waits for completion', async () => {
    const p = await player('viewer-progress');
    await page.goto(`${base}/viewer#token=${p.token}`);
    for (const title of ['Golden visor', 'Marathon streamer', 'Web badge', 'In-game skin']) {
      await article(title).waitFor();
    }
    expect(await page.getByRole('article').count()).toBe(4);

    const visor = article('Golden visor');
    expect(await visor.getByText('Stream for 1 minute in total').count()).toBe(1);
    const image = visor.getByRole('img', { name: 'Reward: Golden visor' });
    await image.waitFor();
    // The image came with the device token (an <img> alone could not send it): a real 200×200 JPEG.
    await expect.poll(() => image.evaluate((img: HTMLImageElement) => img.naturalWidth)).toBe(200);
    expect(await progress('Golden visor').getAttribute('aria-valuenow')).toBe('0');
    expect(await progress('Golden visor').getAttribute('aria-valuemax')).toBe('1');
    expect(await progress('Marathon streamer').getAttribute('aria-valuemax')).toBe('100');
    expect(await visor.getByRole('button', { name: 'Claim' }).isDisabled()).toBe(true);

    // Streaming moves the progress without a reload.
    await p.stream(3 * MINUTE);
    await expect
      .poll(() => progress('Golden visor').getAttribute('aria-valuenow'), { timeout: REFRESH_WAIT_MS })
      .toBe('1');
    expect(await progress('Marathon streamer').getAttribute('aria-valuenow')).toBe('3');
    expect(await visor.getByRole('button', { name: 'Claim' }).isEnabled()).toBe(true);
    expect(await article('Marathon streamer').getByRole('button', { name: 'Claim' }).isDisabled()).toBe(true);
    await screenshot(page, `${backend}-viewer-progress`);
  });

  it('claims each redemption method and shows it: the display code, Visit, the intent and Open in browser', async () => {
    const p = await player('viewer-claims');
    await p.stream(2 * MINUTE);
    await page.goto(`${base}/viewer#token=${p.token}`);

    // Display code: the code with the filled instructions; the code verifies at the tenant's API.
    await article('Golden visor').getByRole('button', { name: 'Claim' }).click();
    const code = article('Golden visor').locator('.display-code');
    await code.waitFor();
    const displayCode = await code.innerText();
    expect(displayCode).toMatch(
      /^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{4}-[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{4}$/,
    );
    expect(await article('Golden visor').innerText()).toContain(
      `Show ${displayCode} at the front desk to collect Golden visor.`,
    );
    const verified = await call(base, 'POST', '/campaigns/verifyrewardcode', {
      json: { campaignSecret: secrets.Desk, verificationCode: displayCode },
    });
    expect(verified.status, verified.text).toBe(200);
    expect(verified.body).toMatchObject({ rewardCode: 'GOLDEN-VISOR', playerId: 'viewer-claims' });

    // Web URL: a link named Visit to the filled URL.
    await article('Web badge').getByRole('button', { name: 'Claim' }).click();
    const visit = article('Web badge').getByRole('link', { name: 'Visit' });
    await visit.waitFor();
    const url = new URL((await visit.getAttribute('href')) ?? '');
    expect(url.origin + url.pathname).toBe('https://rewards.example/claim');
    expect(url.searchParams.get('r')).toBe('WEB-BADGE');
    const webVerified = await call(base, 'POST', '/campaigns/verifyrewardcode', {
      json: { campaignSecret: secrets.Web, verificationCode: url.searchParams.get('a') },
    });
    expect(webVerified.status, webVerified.text).toBe(200);

    // Intent: what the app is asked to do, and a link to the data URL for a browser.
    await article('In-game skin').getByRole('button', { name: 'Claim' }).click();
    const open = article('In-game skin').getByRole('link', { name: 'Open in browser' });
    await open.waitFor();
    const dataUrl = new URL((await open.getAttribute('href')) ?? '');
    expect(dataUrl.origin + dataUrl.pathname).toBe('https://game.example/reward');
    expect(dataUrl.searchParams.get('r')).toBe('IN-GAME-SKIN');
    const described = await article('In-game skin').innerText();
    expect(described).toContain('startActivity com.example.game/com.example.game.RewardActivity');
    expect(described).toContain('action android.intent.action.VIEW');
    const appVerified = await call(base, 'POST', '/campaigns/verifyrewardcode', {
      json: { campaignSecret: secrets.App, verificationCode: dataUrl.searchParams.get('a') },
    });
    expect(appVerified.status, appVerified.text).toBe(200);

    // A reload shows the same claims (from the server), and no Claim button for them.
    await page.reload();
    await article('Golden visor').locator('.display-code').waitFor();
    expect(await article('Golden visor').locator('.display-code').innerText()).toBe(displayCode);
    expect(await article('Web badge').getByRole('button', { name: 'Claim' }).count()).toBe(0);
    // Long codes and class names wrap: nothing is wider than the phone's screen.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(412);
    await screenshot(page, `${backend}-viewer-claimed`);
  });

  it('says why in an alert when the token is missing or not valid', async () => {
    await page.goto(`${base}/viewer`);
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.innerText()).toContain('#token=');

    await page.goto(`${base}/viewer#token=not-a-device-token`);
    await page.reload();
    await alert.waitFor();
    expect(await alert.innerText()).toContain("This link's token is not accepted");
    expect(await page.getByRole('article').count()).toBe(0);
    await screenshot(page, `${backend}-viewer-bad-token`);
  });

  it('has no serious or critical accessibility violations (axe-core), and large touch targets', async () => {
    const p = await player('viewer-axe');
    await p.stream(2 * MINUTE);
    await page.goto(`${base}/viewer#token=${p.token}`);
    await article('Golden visor').getByRole('button', { name: 'Claim' }).waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    const box = await article('Golden visor').getByRole('button', { name: 'Claim' }).boundingBox();
    expect(box?.height).toBeGreaterThanOrEqual(44);
    await article('Golden visor').getByRole('button', { name: 'Claim' }).click();
    await article('Golden visor').locator('.display-code').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    // Nothing is wider than the phone's screen.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(412);

    await page.goto(`${base}/viewer`);
    await page.getByRole('alert').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
  });
});
