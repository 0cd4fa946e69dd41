import { describe, expect, it } from 'vitest';
import { checkRedemption, fillRedemption, type RedemptionConfig } from './redemption.ts';

const values = {
  displayCode: 'ABCD-EFGH',
  achievementCode: 'ACH2345678ABCDEFGHJKLMNPQR',
  rewardCode: 'gold hat/1&2',
  rewardTitle: 'Gold & Hat',
};

describe('redemption templates', () => {
  it.each<[string, RedemptionConfig, string[]]>([
    [
      'display code ok',
      { method: 'displayCode', instructionsTemplate: 'Enter {code} for {rewardTitle}' },
      [],
    ],
    [
      'display code without {code}',
      { method: 'displayCode', instructionsTemplate: 'Go to the desk' },
      ['must contain the placeholder {code}'],
    ],
    [
      'display code with unknown placeholder',
      { method: 'displayCode', instructionsTemplate: '{code} {cod}' },
      ['unknown placeholder {cod}'],
    ],
    [
      'intent ok',
      {
        method: 'intent',
        form: 'startActivity',
        packageName: 'com.x.y',
        dataUrlTemplate: 'game://claim?a={achievement.code}&r={reward.code}',
      },
      [],
    ],
    [
      'intent missing {reward.code}',
      {
        method: 'intent',
        form: 'broadcast',
        packageName: 'com.x',
        dataUrlTemplate: 'game://claim?a={achievement.code}',
      },
      ['must contain the placeholder {reward.code}'],
    ],
    [
      'intent with a javascript: URL',
      {
        method: 'intent',
        form: 'startService',
        packageName: 'com.x',
        dataUrlTemplate: 'javascript:alert({achievement.code},{reward.code})',
      },
      ['must not use'],
    ],
    [
      'web URL ok',
      { method: 'webUrl', urlTemplate: 'https://x.example/c/{reward.code}?a={achievement.code}' },
      [],
    ],
    [
      'web URL without placeholders',
      { method: 'webUrl', urlTemplate: 'https://x.example/claim' },
      ['{achievement.code}', '{reward.code}'],
    ],
    [
      'web URL not http',
      { method: 'webUrl', urlTemplate: 'game://{achievement.code}/{reward.code}' },
      ['http'],
    ],
    [
      'web URL not a URL',
      { method: 'webUrl', urlTemplate: '{achievement.code}{reward.code}' },
      ['absolute URL'],
    ],
  ])('%s', (_name, config, expected) => {
    const messages = checkRedemption(config).map((e) => e.message);
    expect(messages.length).toBe(expected.length);
    expected.forEach((fragment, i) => {
      expect(messages[i]).toContain(fragment);
    });
  });

  it('fills the display code instructions as text', () => {
    expect(
      fillRedemption(
        { method: 'displayCode', instructionsTemplate: 'Type {code} to get {rewardTitle}.' },
        values,
      ),
    ).toEqual({
      method: 'displayCode',
      code: 'ABCD-EFGH',
      instructions: 'Type ABCD-EFGH to get Gold & Hat.',
    });
  });

  it('fills URLs URL-encoded, and the intent with its extras and fallback', () => {
    const intent = fillRedemption(
      {
        method: 'intent',
        form: 'startActivity',
        packageName: 'com.tenant.app',
        activityName: 'com.tenant.app.Claim',
        flags: 268435456,
        dataUrlTemplate: 'tenant://claim?a={achievement.code}&r={reward.code}',
      },
      values,
    );
    expect(intent).toEqual({
      method: 'intent',
      form: 'startActivity',
      packageName: 'com.tenant.app',
      activityName: 'com.tenant.app.Claim',
      action: null,
      category: null,
      flags: 268435456,
      dataUrl: 'tenant://claim?a=ACH2345678ABCDEFGHJKLMNPQR&r=gold%20hat%2F1%262',
      extras: { achievementCode: 'ACH2345678ABCDEFGHJKLMNPQR', rewardCode: 'gold hat/1&2' },
      fallbackUrl: 'tenant://claim?a=ACH2345678ABCDEFGHJKLMNPQR&r=gold%20hat%2F1%262',
    });
    expect(
      fillRedemption(
        { method: 'webUrl', urlTemplate: 'https://t.example/{reward.code}/{achievement.code}' },
        values,
      ),
    ).toEqual({
      method: 'webUrl',
      url: 'https://t.example/gold%20hat%2F1%262/ACH2345678ABCDEFGHJKLMNPQR',
    });
  });
});
