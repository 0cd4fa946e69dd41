import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/api.ts';
import { greyJpeg } from '../helpers/jpeg.ts';
import { GOOD_IMAGE, LONG_CLOCK_ENV, MINUTE, RewardsTenant } from '../helpers/rewards.ts';
import { backends, manualClock, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;
const DISPLAY = { method: 'displayCode', instructionsTemplate: 'Enter {code}' };
const HEADER = 'Reward Code,Reward Title,Reward Requirement,Reward Image,Reward Rules,Target';
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000c8000000c8080200000000000000000049454e44ae426082',
  'hex',
);

function bomb(): Buffer {
  const out = Buffer.from(greyJpeg(200, 200));
  const sof = out.indexOf(Buffer.from([0xff, 0xc0]));
  out.writeUInt16BE(65535, sof + 5);
  out.writeUInt16BE(65535, sof + 7);
  return out;
}

/** Campaigns and challenges as the tenant and the operator manage them: CRUD, validation, import. */
describe.each(backends)('campaigns and challenges (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: RewardsTenant;
  const clock = manualClock(Date.UTC(2026, 2, 2, 9, 0, 0));

  beforeAll(async () => {
    server = await startTestServer(backend, LONG_CLOCK_ENV, { clock });
    base = server.url;
    tenant = await RewardsTenant.create(base, server.adminToken, clock);
  });
  afterAll(async () => server?.close());

  function importForm(csv: string, images: Record<string, Buffer>, asFieldNames = false) {
    const form = new FormData();
    form.append('template', new Blob([csv], { type: 'text/csv' }), 'challenges.csv');
    for (const [name, bytes] of Object.entries(images)) {
      if (asFieldNames)
        form.append(name, new Blob([new Uint8Array(bytes)], { type: 'image/jpeg' }), 'upload.jpg');
      else form.append('images', new Blob([new Uint8Array(bytes)], { type: 'image/jpeg' }), name);
    }
    return form;
  }

  async function postImport(campaignId: string, form: FormData, token?: string) {
    const res = await fetch(`${base}/campaigns/${campaignId}/challenges/import`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token ?? (await tenant.token())}` },
      body: form,
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : null) as Json, text };
  }

  const challengeCount = async (campaignId: string) =>
    Number((await tenant.call('GET', `/campaigns/${campaignId}/challenges`)).body.totalCount);

  it('creates, lists, reads and changes campaigns; the secret is shown only on create and rotate', async () => {
    const created = await tenant.campaign(DISPLAY, {
      name: 'Spring',
      timezone: 'europe/berlin',
      startsAt: clock.now(),
      endsAt: clock.now() + 30 * 86_400_000,
    });
    expect(created).toMatchObject({
      name: 'Spring',
      timezone: 'Europe/Berlin',
      startsAt: clock.now(),
      redemption: DISPLAY,
      createdAt: clock.now(),
    });
    expect(String(created.campaignSecret)).toMatch(/^lcs_[A-Za-z0-9_-]{43}$/);
    const one = await tenant.call('GET', `/campaigns/${created.campaignId}`);
    expect(one.status).toBe(200);
    expect(one.body.campaignSecret).toBeUndefined();
    expect(JSON.stringify(one.body)).not.toContain(created.campaignSecret);
    const stored = await server.services.storage.db.selectFrom('campaigns').selectAll().execute();
    expect(JSON.stringify(stored)).not.toContain(created.campaignSecret);

    const list = await tenant.call('GET', '/campaigns');
    expect(list.body).toMatchObject({ page: 1, pageSize: 1000, hasMore: false });
    expect((list.body.campaigns as Json[]).map((c) => c.campaignId)).toContain(created.campaignId);
    const page = await tenant.call('GET', '/campaigns/page/1?pageSize=1');
    expect(page.body).toMatchObject({ page: 1, pageSize: 1 });

    clock.advance(MINUTE);
    const patched = await tenant.call('PATCH', `/campaigns/${created.campaignId}`, {
      name: 'Spring 2',
      endsAt: null,
      redemption: { method: 'webUrl', urlTemplate: 'https://t.example/{reward.code}?a={achievement.code}' },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({
      name: 'Spring 2',
      endsAt: null,
      timezone: 'Europe/Berlin',
      updatedAt: clock.now(),
    });
    const badWindow = await tenant.call('PATCH', `/campaigns/${created.campaignId}`, {
      endsAt: clock.now() - 86_400_000,
    });
    expect(badWindow.status).toBe(400);
    expect(badWindow.body.errors).toEqual([{ path: 'endsAt', message: 'must be after startsAt' }]);
    expect((await tenant.call('PATCH', `/campaigns/${created.campaignId}`, {})).status).toBe(400);

    // The operator has the same routes under the tenant.
    const admin = `/admin/v1/tenants/${tenant.tenantId}/campaigns`;
    const byOperator = await call(base, 'POST', admin, {
      token: server.adminToken,
      json: { name: 'Op', redemption: DISPLAY },
    });
    expect(byOperator.status, byOperator.text).toBe(201);
    expect(byOperator.body.campaignSecret).toEqual(expect.any(String));
    const opList = await call(base, 'GET', admin, { token: server.adminToken });
    expect((opList.body.campaigns as Json[]).map((c) => c.campaignId)).toContain(created.campaignId);
    const opChallenge = await call(base, 'POST', `${admin}/${byOperator.body.campaignId}/challenges`, {
      token: server.adminToken,
      json: {
        rewardCode: 'OP',
        rewardTitle: 'T',
        rewardRequirement: 'R',
        rewardImage: GOOD_IMAGE,
        rule: { type: 'uniqueDays', target: 2 },
      },
    });
    expect(opChallenge.status, opChallenge.text).toBe(201);
    expect(opChallenge.body.imageUrl).toBe(
      `${base}${admin}/${byOperator.body.campaignId}/challenges/${opChallenge.body.challengeId}/image`,
    );
    const unknownTenant = `/admin/v1/tenants/${'0'.repeat(8)}-0000-7000-8000-${'0'.repeat(12)}/campaigns`;
    expect((await call(base, 'GET', unknownTenant, { token: server.adminToken })).status).toBe(404);
    // Tokens without the scope, and the operator token on tenant routes, are refused.
    const narrow = await RewardsTenant.create(base, server.adminToken, clock, ['sessions:read']);
    expect((await narrow.call('GET', '/campaigns')).status).toBe(403);
    expect((await call(base, 'GET', '/campaigns', { token: server.adminToken })).status).toBe(403);
  });

  it.each<[string, Json, string, RegExp]>([
    ['an unknown time zone', { timezone: 'Mars/Base' }, 'timezone', /IANA/],
    ['an offset for a time zone', { timezone: '+02:00' }, 'timezone', /IANA/],
    ['a window that ends first', { startsAt: 2000, endsAt: 1000 }, 'endsAt', /after/],
    ['an unknown method', { redemption: { method: 'email' } }, 'redemption.method', /one of/],
    [
      'display instructions without {code}',
      { redemption: { method: 'displayCode', instructionsTemplate: 'Hi' } },
      'redemption.instructionsTemplate',
      /\{code\}/,
    ],
    [
      'an unknown placeholder',
      { redemption: { method: 'displayCode', instructionsTemplate: '{code} {prize}' } },
      'redemption.instructionsTemplate',
      /unknown placeholder/,
    ],
    [
      'an intent without packageName',
      {
        redemption: {
          method: 'intent',
          form: 'startActivity',
          dataUrlTemplate: 'x://{achievement.code}/{reward.code}',
        },
      },
      'redemption.packageName',
      /required/,
    ],
    [
      'an intent with a bad form',
      {
        redemption: {
          method: 'intent',
          form: 'launch',
          packageName: 'a.b',
          dataUrlTemplate: 'x://{achievement.code}/{reward.code}',
        },
      },
      'redemption.form',
      /one of/,
    ],
    [
      'intent flags beyond int32',
      {
        redemption: {
          method: 'intent',
          form: 'startActivity',
          packageName: 'a.b',
          flags: 2 ** 31,
          dataUrlTemplate: 'x://{achievement.code}/{reward.code}',
        },
      },
      'redemption.flags',
      /<=/,
    ],
    [
      'an intent data URL without {reward.code}',
      {
        redemption: {
          method: 'intent',
          form: 'startService',
          packageName: 'a.b',
          dataUrlTemplate: 'x://{achievement.code}',
        },
      },
      'redemption.dataUrlTemplate',
      /\{reward\.code\}/,
    ],
    [
      'a web URL without placeholders',
      { redemption: { method: 'webUrl', urlTemplate: 'https://t.example/claim' } },
      'redemption.urlTemplate',
      /placeholder/,
    ],
    [
      'a javascript: web URL',
      { redemption: { method: 'webUrl', urlTemplate: 'javascript:x({achievement.code},{reward.code})' } },
      'redemption.urlTemplate',
      /http/,
    ],
    [
      'an unknown redemption field',
      { redemption: { ...DISPLAY, extra: 1 } },
      'redemption.extra',
      /not an allowed field/,
    ],
    ['an unknown field', { owner: 'me' }, 'owner', /not an allowed field/],
    ['no name', { name: undefined }, 'name', /required/],
  ])('rejects a campaign with %s', async (_name, change, path, message) => {
    const body = { name: 'Bad', redemption: DISPLAY, ...change };
    const res = await tenant.call('POST', '/campaigns', JSON.parse(JSON.stringify(body)));
    expect(res.status, res.text).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    const errors = res.body.errors as { path: string; message: string }[];
    expect(
      errors.find((e) => e.path === path && message.test(e.message)),
      JSON.stringify(errors),
    ).toBeDefined();
  });

  it('challenges: JSON create, get, patch, delete while unclaimed', async () => {
    const campaign = await tenant.campaign(DISPLAY);
    const ch = await tenant.challenge(campaign.campaignId, 'HAT', 'totalMinutes', 10);
    expect(ch).toMatchObject({
      campaignId: campaign.campaignId,
      rewardCode: 'HAT',
      rule: { type: 'totalMinutes', target: 10 },
      createdAt: clock.now(),
    });
    const path = `/campaigns/${campaign.campaignId}/challenges/${ch.challengeId}`;
    expect((await tenant.call('GET', path)).body).toEqual(ch);
    const dup = await tenant.call('POST', `/campaigns/${campaign.campaignId}/challenges`, {
      rewardCode: 'HAT',
      rewardTitle: 'T',
      rewardRequirement: 'R',
      rewardImage: GOOD_IMAGE,
      rule: { type: 'sessionCount', target: 1 },
    });
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe('reward_code_taken');
    const unknownRule = await tenant.call('POST', `/campaigns/${campaign.campaignId}/challenges`, {
      rewardCode: 'X',
      rewardTitle: 'T',
      rewardRequirement: 'R',
      rewardImage: GOOD_IMAGE,
      rule: { type: 'totalHours', target: 1 },
    });
    expect(unknownRule.status).toBe(400);
    expect(unknownRule.body.errors).toEqual([
      { path: 'rule.type', message: expect.stringContaining('totalMinutes') },
    ]);

    const patched = await tenant.call('PATCH', path, {
      rewardTitle: 'New title',
      rule: { type: 'sessionCount', target: 1 },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({
      rewardTitle: 'New title',
      rule: { type: 'sessionCount', target: 1 },
    });

    const player = await tenant.player('patcher');
    await player.stream(MINUTE);
    expect((await player.claim(ch.challengeId)).status).toBe(201);
    // Claimed: title and image may change, reward code and rule may not, and it cannot be deleted.
    expect((await tenant.call('PATCH', path, { rewardTitle: 'Later' })).status).toBe(200);
    expect((await tenant.call('PATCH', path, { rewardImage: GOOD_IMAGE })).status).toBe(200);
    const locked = await tenant.call('PATCH', path, { rewardCode: 'HAT2' });
    expect(locked.status).toBe(409);
    expect(locked.body.code).toBe('challenge_claimed');
    const del = await tenant.call('DELETE', path);
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('challenge_claimed');

    const spare = await tenant.challenge(campaign.campaignId, 'SPARE', 'uniqueDays', 1);
    const spareDel = await tenant.call(
      'DELETE',
      `/campaigns/${campaign.campaignId}/challenges/${spare.challengeId}`,
    );
    expect(spareDel.status).toBe(204);
    expect(
      (await tenant.call('GET', `/campaigns/${campaign.campaignId}/challenges/${spare.challengeId}`)).status,
    ).toBe(404);
  });

  it.each<[string, string]>([
    ['a PNG', PNG.toString('base64')],
    ['a 201×200 JPEG', greyJpeg(201, 200).toString('base64')],
    ['an absurd declared size (image bomb)', bomb().toString('base64')],
    ['a truncated JPEG', greyJpeg(200, 200).subarray(0, 200).toString('base64')],
    ['text that is not base64', 'not an image!'],
  ])('rejects %s as the reward image with invalid_image', async (_name, rewardImage) => {
    const campaign = await tenant.campaign(DISPLAY);
    const res = await tenant.call('POST', `/campaigns/${campaign.campaignId}/challenges`, {
      rewardCode: 'IMG',
      rewardTitle: 'T',
      rewardRequirement: 'R',
      rewardImage,
      rule: { type: 'totalMinutes', target: 1 },
    });
    expect(res.status, res.text).toBe(400);
    expect(res.body.code).toBe('invalid_image');
    expect((res.body.errors as Json[])[0].path).toBe('rewardImage');
    expect(await challengeCount(campaign.campaignId)).toBe(0);
  });

  it('imports a valid template: every rule wording, images by file or field name, formulas as text', async () => {
    const campaign = await tenant.campaign(DISPLAY);
    const csv = [
      HEADER,
      'TOTAL,Gold hat,Stream 60 minutes,hat.jpg,Total mins streamed,60',
      'SOLO,"Cape, red",One long stream,cape.jpg,Mins streamed in a single session,30',
      'DAYS,Badge,Stream on 3 days,hat.jpg,Unique days streamed on,3',
      'STREAK,Crown,3 days in a row,cape.jpg,Streak of days streamed on,3',
      'COUNT,"=HYPERLINK(""http://evil.example"",""click"")",+1 stream,hat.jpg,Stream session count,5',
    ].join('\r\n');
    const res = await postImport(
      campaign.campaignId,
      importForm(csv, { 'hat.jpg': greyJpeg(200, 200), 'cape.jpg': greyJpeg(200, 200) }),
    );
    expect(res.status, res.text).toBe(201);
    expect(res.body.imported).toBe(5);
    const challenges = res.body.challenges as Json[];
    expect(challenges.map((c) => [c.rewardCode, (c.rule as Json).type])).toEqual([
      ['TOTAL', 'totalMinutes'],
      ['SOLO', 'singleSessionMinutes'],
      ['DAYS', 'uniqueDays'],
      ['STREAK', 'streakDays'],
      ['COUNT', 'sessionCount'],
    ]);
    expect(challenges[1].rewardTitle).toBe('Cape, red');
    expect(challenges[4]).toMatchObject({
      rewardTitle: '=HYPERLINK("http://evil.example","click")',
      rewardRequirement: '+1 stream',
    });
    const img = await fetch(String(challenges[0].imageUrl), {
      headers: { authorization: `Bearer ${await tenant.token()}` },
    });
    expect(img.status).toBe(200);
    expect(Buffer.from(await img.arrayBuffer()).equals(greyJpeg(200, 200))).toBe(true);

    // Images named by their part's field name work too; a second import with a taken code fails whole.
    const byField = await postImport(
      campaign.campaignId,
      importForm(
        `${HEADER}\nNEW,T,R,pic,Total mins streamed,1\nTOTAL,T,R,pic,Total mins streamed,1\n`,
        { pic: greyJpeg(200, 200) },
        true,
      ),
    );
    expect(byField.status).toBe(400);
    expect(byField.body.errors).toEqual([
      { path: 'rows[1].Reward Code', message: expect.stringContaining('already used') },
    ]);
    expect(await challengeCount(campaign.campaignId)).toBe(5);
    const ok = await postImport(
      campaign.campaignId,
      importForm(`${HEADER}\nNEW,T,R,pic,Total mins streamed,1\n`, { pic: greyJpeg(200, 200) }, true),
    );
    expect(ok.status, ok.text).toBe(201);
  });

  it('rejects a broken template whole, with per-row errors', async () => {
    const campaign = await tenant.campaign(DISPLAY);
    const csv = [
      HEADER,
      'A,Fine,Fine,hat.jpg,Total mins streamed,10',
      'B,Title,Req,hat.jpg,Hours of fun,10',
      'C,Title,Req,nowhere.jpg,Stream session count,0',
      'D,Title,Req,big.jpg,Unique days streamed on,2',
      'E,Title,Req,hat.jpg',
    ].join('\n');
    const res = await postImport(
      campaign.campaignId,
      importForm(csv, { 'hat.jpg': greyJpeg(200, 200), 'big.jpg': greyJpeg(300, 300) }),
    );
    expect(res.status, res.text).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect((res.body.errors as Json[]).map((e) => e.path)).toEqual([
      'rows[1].Reward Rules',
      'rows[2].Target',
      'rows[2].Reward Image',
      'rows[3].Reward Image',
      'rows[4]',
    ]);
    expect(String((res.body.errors as Json[])[0].message)).toMatch(/unknown rule "Hours of fun"/);
    expect(await challengeCount(campaign.campaignId)).toBe(0);
  });

  it.each<[string, () => FormData, number, string, string | null]>([
    [
      'an image bomb',
      () => importForm(`${HEADER}\nA,T,R,b.jpg,Total mins streamed,1\n`, { 'b.jpg': bomb() }),
      400,
      'invalid_image',
      'rows[0].Reward Image',
    ],
    [
      'a PNG image',
      () => importForm(`${HEADER}\nA,T,R,p.png,Total mins streamed,1\n`, { 'p.png': PNG }),
      400,
      'invalid_image',
      'rows[0].Reward Image',
    ],
    [
      'a wrong header',
      () => importForm('Code,Title\nA,T\n', {}),
      400,
      'validation_failed',
      'template.header',
    ],
    ['no rows', () => importForm(`${HEADER}\n`, {}), 400, 'validation_failed', 'template'],
    [
      'no template',
      () => {
        const f = new FormData();
        f.append('images', new Blob([new Uint8Array(greyJpeg(200, 200))]), 'a.jpg');
        return f;
      },
      400,
      'validation_failed',
      'template',
    ],
  ])('rejects an import with %s', async (_name, form, status, code, path) => {
    const campaign = await tenant.campaign(DISPLAY);
    const res = await postImport(campaign.campaignId, form());
    expect(res.status, res.text).toBe(status);
    expect(res.body.code).toBe(code);
    if (path) expect((res.body.errors as Json[]).map((e) => e.path)).toContain(path);
    expect(await challengeCount(campaign.campaignId)).toBe(0);
  });

  it('imports: JSON is 415, too large is 413, another tenant is 404', async () => {
    const campaign = await tenant.campaign(DISPLAY);
    const json = await tenant.call('POST', `/campaigns/${campaign.campaignId}/challenges/import`, {
      template: HEADER,
    });
    expect(json.status).toBe(415);
    expect(json.body.code).toBe('unsupported_media_type');
    const huge = importForm(`${HEADER}\nA,T,R,big.jpg,Total mins streamed,1\n`, {
      'big.jpg': Buffer.alloc(11 * 1024 * 1024),
    });
    const tooLarge = await postImport(campaign.campaignId, huge);
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.code).toBe('payload_too_large');
    const stranger = await RewardsTenant.create(base, server.adminToken, clock);
    const foreign = await postImport(
      campaign.campaignId,
      importForm(`${HEADER}\nA,T,R,a.jpg,Total mins streamed,1\n`, { 'a.jpg': greyJpeg(200, 200) }),
      await stranger.token(),
    );
    expect(foreign.status).toBe(404);
    expect(await challengeCount(campaign.campaignId)).toBe(0);
  });

  it('lists the routes in the OpenAPI document', async () => {
    const doc = await call<{ paths: Record<string, unknown> }>(base, 'GET', '/openapi.json');
    for (const p of [
      '/campaigns',
      '/campaigns/{campaignId}',
      '/campaigns/{campaignId}/secret/rotate',
      '/campaigns/{campaignId}/challenges',
      '/campaigns/{campaignId}/challenges/import',
      '/campaigns/{campaignId}/challenges/{challengeId}/image',
      '/campaigns/{campaignId}/players/{playerId}/progress',
      '/campaigns/verifyrewardcode',
      '/client/v1/challenges',
      '/client/v1/challenges/{challengeId}/claim',
      '/admin/v1/tenants/{tenantId}/campaigns',
    ]) {
      expect(doc.body.paths[p], p).toBeDefined();
    }
  });
});
