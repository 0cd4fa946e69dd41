/**
 * Screenshots (CONTRACT §14) through the real server over HTTP: the device's multipart upload, sizes
 * read from the image header, the Screenshot event beside the stored image, the tenant's image route,
 * refusals as problem documents, retention taking the image with its event, and the sweep of
 * uploads whose event never committed.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessToken, call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { greyJpeg } from '../helpers/jpeg.ts';
import { GIF, greyPng } from '../helpers/png.ts';
import { DAY, LONG_CLOCK_ENV } from '../helpers/rewards.ts';
import { backends, manualClock, startTestServer, type TestServer } from '../helpers/server.ts';
import { openTail } from '../helpers/sse.ts';

type Json = Record<string, unknown>;
const HOUR = 3_600_000;
const MiB = 1024 * 1024;

describe.each(backends)('screenshots (%s)', (backend) => {
  const T0 = Math.floor(Date.now() / DAY) * DAY + 10 * HOUR;
  const clock = manualClock(T0);
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  let other: TenantFixture;
  let device: string;
  let otherPlayer: string;

  beforeAll(async () => {
    server = await startTestServer(
      backend,
      {
        ...LONG_CLOCK_ENV,
        LIVELINE_DEVICE_TOKEN_TTL_S: String(30 * 86400),
        LIVELINE_EVENT_RETENTION_DAYS: '2',
        LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
      },
      { clock },
    );
    base = server.url;
    tenant = await createTenant(base, server.adminToken, { name: 'shots' });
    other = await createTenant(base, server.adminToken, { name: 'other' });
    device = await deviceToken(base, tenant.token, 'shot-player');
    otherPlayer = await deviceToken(base, tenant.token, 'someone-else');
  });
  afterAll(async () => server?.close());

  async function newSession(token = device) {
    const res = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    expect(res.status).toBe(201);
    return String(res.body.sessionId);
  }

  /** A multipart upload as a device sends it (fetch builds the body). */
  async function upload(
    sessionId: string,
    parts: { image?: { bytes: Uint8Array; type: string }; fields?: Record<string, string> },
    token = device,
  ) {
    const form = new FormData();
    if (parts.image)
      form.append('image', new Blob([new Uint8Array(parts.image.bytes)], { type: parts.image.type }), 'shot');
    for (const [k, v] of Object.entries(parts.fields ?? {})) form.append(k, v);
    const res = await fetch(`${base}/client/v1/sessions/${sessionId}/screenshots`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: form,
    });
    const text = await res.text();
    return { status: res.status, type: res.headers.get('content-type'), body: JSON.parse(text) as Json };
  }

  /** The session's rows in `screenshots`, stored or pending. */
  function imageRowsOf(sessionId: string) {
    return server.services.storage.db
      .selectFrom('screenshots')
      .select('image_id')
      .where('session_id', '=', sessionId)
      .execute();
  }

  async function fetchImage(sessionId: string, imageId: string, token = tenant.token) {
    const res = await fetch(`${base}/sessions/${sessionId}/screenshots/${imageId}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return {
      status: res.status,
      type: res.headers.get('content-type'),
      bytes: Buffer.from(await res.arrayBuffer()),
    };
  }

  async function screenshotEvents(sessionId: string) {
    const res = await call<{ events: Json[] }>(
      base,
      'GET',
      `/sessions/${sessionId}/events?eventType=Screenshot`,
      {
        token: tenant.token,
      },
    );
    expect(res.status).toBe(200);
    return res.body.events;
  }

  it('stores a JPEG and a PNG with their sizes from the header; the tenant reads the same bytes back', async () => {
    const sessionId = await newSession();
    const jpeg = greyJpeg(640, 360);
    const png = greyPng(320, 180);
    const a = await upload(sessionId, { image: { bytes: jpeg, type: 'image/jpeg' } });
    expect(a.status, JSON.stringify(a.body)).toBe(201);
    expect(a.body).toMatchObject({ sessionId, eventType: 'Screenshot', width: 640, height: 360 });
    expect(a.body.timestamp).toBe(clock.now());
    // The part's label is not needed: the bytes say what the image is.
    const b = await upload(sessionId, { image: { bytes: png, type: 'application/octet-stream' } });
    expect(b.status, JSON.stringify(b.body)).toBe(201);
    expect(b.body).toMatchObject({ width: 320, height: 180 });

    const events = await screenshotEvents(sessionId);
    expect(events).toEqual(expect.arrayContaining([a.body, b.body]));
    expect(events).toHaveLength(2);

    const gotJpeg = await fetchImage(sessionId, String(a.body.imageId));
    expect(gotJpeg.status).toBe(200);
    expect(gotJpeg.type).toBe('image/jpeg');
    expect(gotJpeg.bytes.equals(jpeg)).toBe(true);
    const gotPng = await fetchImage(sessionId, String(b.body.imageId));
    expect(gotPng.type).toBe('image/png');
    expect(gotPng.bytes.equals(png)).toBe(true);

    // Another tenant, an unknown image, and an image named under another session: 404.
    expect((await fetchImage(sessionId, String(a.body.imageId), other.token)).status).toBe(404);
    expect((await fetchImage(sessionId, '0190a0b0-0000-7000-8000-000000000000')).status).toBe(404);
    const elsewhere = await newSession();
    expect((await fetchImage(elsewhere, String(a.body.imageId))).status).toBe(404);
  });

  it('ties the screenshot to the stream given, or to the live one', async () => {
    const sessionId = await newSession();
    const given = '0190a0b0-1111-7000-8000-000000000001';
    const a = await upload(sessionId, {
      image: { bytes: greyJpeg(16, 16), type: 'image/jpeg' },
      fields: { streamingSessionId: given },
    });
    expect(a.status).toBe(201);
    expect(a.body.streamingSessionId).toBe(given);
    const started = await call(base, 'POST', `/client/v1/sessions/${sessionId}/stream/start`, {
      token: device,
      json: { resolution: 1, aspectratio: 0 },
    });
    expect(started.status).toBe(200);
    const b = await upload(sessionId, { image: { bytes: greyPng(8, 8), type: 'image/png' } });
    expect(b.body.streamingSessionId).toBe(started.body.streamingSessionId);
  });

  it('writes the event through the events write path: the live tail shows it', async () => {
    const sessionId = await newSession();
    const reader = await openTail(base, `/sessions/${sessionId}/events/stream`, tenant.token);
    try {
      const shot = await upload(sessionId, { image: { bytes: greyPng(10, 10), type: 'image/png' } });
      expect(shot.status).toBe(201);
      await reader.until(() => reader.events().some((m) => m.data.imageId === shot.body.imageId), 10_000);
      const message = reader.events().find((m) => m.data.imageId === shot.body.imageId);
      expect(message?.event).toBe('Screenshot');
      expect(message?.data).toMatchObject(shot.body);
    } finally {
      reader.close();
    }
  });

  it('leaves nothing behind when the image cannot be stored: no event, no row', async () => {
    // A file where the tenant's directory of images should be: the filesystem store cannot write there.
    const solo = await createTenant(base, server.adminToken, { name: 'no room' });
    const soloDevice = await deviceToken(base, solo.token, 'p');
    const res = await call(base, 'POST', '/client/v1/sessions', { token: soloDevice, json: {} });
    const sessionId = String(res.body.sessionId);
    const dir = path.join(server.config.dataDir, 'blobs', 'screenshots');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, solo.tenantId), 'not a directory');
    try {
      const failed = await upload(
        sessionId,
        { image: { bytes: greyPng(8, 8), type: 'image/png' } },
        soloDevice,
      );
      expect(failed.status).toBe(500);
      expect(failed.body.code).toBe('internal');
      const rows = await server.services.storage.db
        .selectFrom('screenshots')
        .select('image_id')
        .where('session_id', '=', sessionId)
        .execute();
      expect(rows).toEqual([]);
      const events = await call<{ events: Json[] }>(base, 'GET', `/sessions/${sessionId}/events`, {
        token: solo.token,
      });
      expect(events.body.events).toEqual([]);
    } finally {
      fs.rmSync(path.join(dir, solo.tenantId));
    }
  });

  it('refuses what is not a JPEG or PNG, lies about itself, is too large or has the wrong parts', async () => {
    const sessionId = await newSession();
    const png = greyPng(64, 64);
    const refused = [
      [{ image: { bytes: GIF, type: 'image/gif' } }, 400, 'invalid_image'],
      [{ image: { bytes: Buffer.from('not an image at all'), type: 'image/jpeg' } }, 400, 'invalid_image'],
      [{ image: { bytes: png.subarray(0, png.length - 30), type: 'image/png' } }, 400, 'invalid_image'],
      [{ image: { bytes: greyJpeg(640, 360).subarray(0, 600), type: 'image/jpeg' } }, 400, 'invalid_image'],
      // A PNG labelled as a JPEG.
      [{ image: { bytes: png, type: 'image/jpeg' } }, 400, 'invalid_image'],
      [{ image: { bytes: png, type: 'text/plain' } }, 400, 'invalid_image'],
      [
        { image: { bytes: Buffer.concat([greyJpeg(64, 64), Buffer.alloc(5 * MiB)]), type: 'image/jpeg' } },
        413,
        'payload_too_large',
      ],
      [{ fields: { streamingSessionId: '0190a0b0-1111-7000-8000-000000000001' } }, 400, 'validation_failed'],
      [{ image: { bytes: png, type: 'image/png' }, fields: { note: 'hi' } }, 400, 'validation_failed'],
      [
        { image: { bytes: png, type: 'image/png' }, fields: { streamingSessionId: 'nope' } },
        400,
        'validation_failed',
      ],
    ] as const;
    for (const [parts, status, code] of refused) {
      const res = await upload(sessionId, parts);
      expect(res.status, String(res.body.detail)).toBe(status);
      expect(res.type).toMatch(/^application\/problem\+json/);
      expect(res.body.code).toBe(code);
    }
    // Not multipart at all: 415.
    const json = await call(base, 'POST', `/client/v1/sessions/${sessionId}/screenshots`, {
      token: device,
      json: { image: 'aGVsbG8=' },
    });
    expect(json.status).toBe(415);
    expect(json.body.code).toBe('unsupported_media_type');
    // Another player's session, a tenant token on the device route: refused before the body matters.
    const theirs = await newSession(otherPlayer);
    expect((await upload(theirs, { image: { bytes: png, type: 'image/png' } })).status).toBe(404);
    expect((await upload(sessionId, { image: { bytes: png, type: 'image/png' } }, tenant.token)).status).toBe(
      403,
    );
    // Nothing of any refused upload was stored: no event, no row, no blob.
    expect(await screenshotEvents(sessionId)).toEqual([]);
    const rows = await server.services.storage.db
      .selectFrom('screenshots')
      .select('image_id')
      .where('session_id', '=', sessionId)
      .execute();
    expect(rows).toEqual([]);
  });

  it('an upload whose images are erased while it runs (the player erased) answers 404 and leaves nothing', async () => {
    const sessionId = await newSession();
    const { blobs, storage, screenshots } = server.services;
    // The upload stops once its blob is written, until the erasure has run (the interleaving the fuzz
    // found: a 500 before).
    const put = blobs.put.bind(blobs);
    let written!: () => void;
    const blobWritten = new Promise<void>((resolve) => {
      written = resolve;
    });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    blobs.put = async (...args: Parameters<typeof put>) => {
      await put(...args);
      written();
      await released;
    };
    try {
      const pending = upload(sessionId, { image: { bytes: greyJpeg(16, 16), type: 'image/jpeg' } });
      await blobWritten;
      // The players module's eraser for screenshots: every image of the session, pending ones too.
      expect(await screenshots.eraseSessions([sessionId], 100)).toBe(1);
      release();
      const answer = await pending;
      expect(answer.status).toBe(404);
      expect(answer.type).toContain('application/problem+json');
      expect(answer.body.code).toBe('not_found');
    } finally {
      blobs.put = put;
    }
    expect(await imageRowsOf(sessionId)).toEqual([]);
    const events = await storage.db
      .selectFrom('events')
      .select('event_type')
      .where('session_id', '=', sessionId)
      .where('event_type', '=', 'Screenshot')
      .execute();
    expect(events).toEqual([]);
  });
  it('retention deletes the image with its event, and the sweep deletes uploads that never got their event', async () => {
    const sessionId = await newSession();
    const shot = await upload(sessionId, { image: { bytes: greyJpeg(32, 32), type: 'image/jpeg' } });
    expect(shot.status).toBe(201);
    const imageId = String(shot.body.imageId);
    const { blobs, storage, screenshots } = server.services;
    const key = `screenshots/${tenant.tenantId}/${sessionId}/${imageId}`;
    expect(await blobs.get(key)).not.toBeNull();

    // An upload that died between its blob and its event: a pending row and a blob, nothing else.
    const orphan = {
      image_id: '0190a0b0-2222-7000-8000-000000000002',
      tenant_id: tenant.tenantId,
      session_id: sessionId,
      event_id: null,
      content_type: 'image/png',
      width: 8,
      height: 8,
      size_bytes: 10,
      created_at: clock.now(),
    };
    await storage.db.insertInto('screenshots').values(orphan).execute();
    const orphanKey = `screenshots/${tenant.tenantId}/${sessionId}/${orphan.image_id}`;
    await blobs.put(orphanKey, greyPng(8, 8), 'image/png');
    const sweepOrphans = server.services.jobs.find((j) => j.name === 'screenshots.orphans');
    expect(await sweepOrphans?.run()).toEqual({ deleted: 0 }); // not an hour old yet
    clock.advance(HOUR + 1000);
    expect(await sweepOrphans?.run()).toEqual({ deleted: 1 });
    expect(await blobs.get(orphanKey)).toBeNull();
    expect(await blobs.get(key)).not.toBeNull(); // the stored one is not the sweep's

    // Three days on, the default retention (2 days) takes the event, and the image with it.
    clock.advance(3 * DAY);
    tenant.token = await accessToken(base, tenant.clientId, tenant.clientSecret);
    const retention = server.services.jobs.find((j) => j.name === 'events.retention');
    if (!retention) throw new Error('no events.retention job');
    expect(((await retention.run()) as { events: number }).events).toBeGreaterThanOrEqual(1);
    expect(await blobs.get(key)).toBeNull();
    expect((await fetchImage(sessionId, imageId)).status).toBe(404);
    expect(await imageRowsOf(sessionId)).toEqual([]);
    expect(await screenshots.image(sessionId, imageId)).toBeNull();
  });
});
