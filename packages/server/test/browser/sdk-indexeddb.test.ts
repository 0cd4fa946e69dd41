/**
 * The device SDK's IndexedDB buffer storage (`indexedDbEventStorage`) in Chromium against a real
 * server: the SDK (bundled for the browser with esbuild, as an app would) buffers events while its
 * event requests fail, the page's device is closed, and a new device on the same database sends them
 * on start; the server stores each exactly once (one batch had reached it before its answer was lost).
 */
import { build } from 'esbuild'; // comes with tsx, which runs the project
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';
import { launchChromium } from './browser.ts';

let browser: Browser;
let sdk: string;
beforeAll(async () => {
  const bundle = await build({
    entryPoints: [new URL('../../../client/src/index.ts', import.meta.url).pathname],
    bundle: true,
    format: 'iife',
    globalName: 'LivelineSdk',
    platform: 'browser',
    external: ['ws'],
    write: false,
    logLevel: 'silent',
  });
  // An evaluated `var` stays in its scope: hand the bundle's exports to the page's global object.
  sdk = `${bundle.outputFiles[0].text};globalThis.LivelineSdk = LivelineSdk;`;
  browser = await launchChromium();
}, 180_000);
afterAll(async () => browser?.close());

describe.each(backends)('the SDK buffer in IndexedDB across a page reload (%s)', (backend) => {
  let server: TestServer;
  let tenant: TenantFixture;
  let page: Page;

  beforeAll(async () => {
    server = await startTestServer(backend);
    tenant = await createTenant(server.url, server.adminToken);
  });
  afterAll(async () => server?.close());

  /**
   * A page at the server's origin (same-origin requests) with the SDK loaded, in `context`: the pages
   * of one context share its IndexedDB, as the tabs of one browser profile do.
   */
  async function open(context: BrowserContext): Promise<Page> {
    const opened = await context.newPage();
    await opened.goto(`${server.url}/healthz`);
    await opened.evaluate(sdk);
    return opened;
  }

  it('a new device on the same database sends what the last one left, exactly once', async () => {
    const token = await deviceToken(server.url, tenant.token, 'browser-player');
    const context = await browser.newContext();
    page = await open(context);
    const first = await page.evaluate(async (token) => {
      const { LivelineDevice, indexedDbEventStorage } = (globalThis as never as { LivelineSdk: never })
        .LivelineSdk as typeof import('../../../client/src/index.ts');
      // The first batch reaches the server but its answer is lost; then nothing gets through.
      let network: 'loses-answer' | 'down' = 'loses-answer';
      const flaky: typeof fetch = async (input, init) => {
        if (!String(input).endsWith('/events')) return fetch(input, init);
        if (network === 'down') throw new TypeError('Failed to fetch');
        await fetch(input, init);
        network = 'down';
        throw new TypeError('Failed to fetch');
      };
      const device = new LivelineDevice({
        baseUrl: location.origin,
        token,
        fetch: flaky,
        batchSize: 2,
        flushIntervalMs: 60_000,
        retry: { initialDelayMs: 5, maxDelayMs: 20 },
        eventsOverSocket: false,
        storage: indexedDbEventStorage({ name: 'liveline-test' }),
      });
      const { sessionId } = await device.startSession();
      const start = Date.now() - 60_000;
      const ids = [90, 80, 70, 60].map(
        (batteryLevel, i) =>
          device.track({ eventType: 'Health', batteryLevel, timestamp: start + i * 1000 }).id,
      );
      while (device.stats().retries < 3) await new Promise((r) => setTimeout(r, 10));
      const stats = device.stats();
      await device.close(); // writes what is queued, like a page that is going away
      return { sessionId, ids, stats };
    }, token);
    expect(first.stats).toMatchObject({ sent: 0, buffered: 4 });
    await page.close();

    page = await open(context); // a fresh page: only IndexedDB is left of the first
    const second = await page.evaluate(async (token) => {
      const { LivelineDevice, indexedDbEventStorage } = (globalThis as never as { LivelineSdk: never })
        .LivelineSdk as typeof import('../../../client/src/index.ts');
      const device = new LivelineDevice({
        baseUrl: location.origin,
        token,
        eventsOverSocket: false,
        storage: indexedDbEventStorage({ name: 'liveline-test' }),
      });
      await device.flush();
      const stats = device.stats();
      await device.close();
      return stats;
    }, token);
    await context.close();
    expect(second).toMatchObject({ sent: 4, duplicates: 2, buffered: 0 });

    const res = await call<{ events: { id: string }[] }>(server.url, 'GET', `/sessions/${first.sessionId}`, {
      token: tenant.token,
    });
    expect(res.body.events.map((event) => event.id)).toEqual(first.ids);
  });
});
