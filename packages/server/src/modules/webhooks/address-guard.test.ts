import type dns from 'node:dns';
import { describe, expect, it } from 'vitest';
import {
  assertPublicHost,
  BlockedAddressError,
  classifyAddress,
  connectLookup,
  parseV6,
} from './address-guard.ts';

describe('SSRF address classification', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.0.1', 'private'],
    ['169.254.1.1', 'link-local'],
    ['169.254.169.254', 'metadata'],
    ['168.63.129.16', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['100.64.0.1', 'cgnat'],
    ['100.127.255.255', 'cgnat'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['fd00:ec2::254', 'metadata'],
    ['fec0::1', 'private'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:10.1.2.3', 'private'],
    ['64:ff9b::a01:203', 'private'], // NAT64 of 10.1.2.3
    ['2002:c0a8:101::1', 'private'], // 6to4 of 192.168.1.1
    ['::127.0.0.1', 'reserved'], // IPv4-compatible
    ['2001::1', 'reserved'], // Teredo
  ])('%s is %s', (address, cls) => {
    expect(classifyAddress(address)).toBe(cls);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.215.14',
    '172.32.0.1',
    '100.128.0.1',
    '169.253.0.1',
    '2606:4700:4700::1111',
    '2a00:1450:4001:80b::200e',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
  ])('%s is public', (address) => {
    expect(classifyAddress(address)).toBe('public');
  });

  it('is null for what is not an address', () => {
    expect(classifyAddress('example.com')).toBeNull();
    expect(classifyAddress('1.2.3')).toBeNull();
    expect(classifyAddress('::g')).toBeNull();
  });

  it('parses IPv6 text to 16 bytes', () => {
    expect(parseV6('::1')).toEqual([...new Array(15).fill(0), 1]);
    expect(parseV6('1:2:3:4:5:6:7:8')).toEqual([0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8]);
    expect(parseV6('::ffff:1.2.3.4')).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 1, 2, 3, 4]);
    expect(parseV6('fe80::')).toEqual([0xfe, 0x80, ...new Array(14).fill(0)]);
    expect(parseV6('10.0.0.1')).toBeNull();
  });
});

describe('assertPublicHost', () => {
  const lookup = (answers: Record<string, string[]>) => async (host: string) =>
    (answers[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

  it('accepts a name that resolves to public addresses only', async () => {
    await expect(
      assertPublicHost('hooks.example', lookup({ 'hooks.example': ['93.184.215.14'] })),
    ).resolves.toBeUndefined();
  });

  it('refuses a name with any private answer (an attacker picks the order)', async () => {
    const err = await assertPublicHost(
      'rebind.example',
      lookup({ 'rebind.example': ['93.184.215.14', '127.0.0.1'] }),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BlockedAddressError);
    expect((err as BlockedAddressError).cls).toBe('loopback');
  });

  it('checks literal addresses without resolving, brackets or not', async () => {
    const never = async () => {
      throw new Error('resolved');
    };
    await expect(assertPublicHost('[::1]', never)).rejects.toBeInstanceOf(BlockedAddressError);
    await expect(assertPublicHost('169.254.169.254', never)).rejects.toBeInstanceOf(BlockedAddressError);
    await expect(assertPublicHost('8.8.8.8', never)).resolves.toBeUndefined();
  });

  it('resolves localhost for real and refuses it', async () => {
    await expect(assertPublicHost('localhost')).rejects.toBeInstanceOf(BlockedAddressError);
  });
});

describe('BlockedAddressError', () => {
  it('tells the tenant "not allowed" without the address; the log detail has it', () => {
    const err = new BlockedAddressError('rebind.example', '10.1.2.3', 'private');
    expect(err.message).toBe('rebind.example is not allowed: webhooks may reach public addresses only');
    expect(err.message).not.toContain('10.1.2.3');
    expect(err.message).not.toContain('private');
    expect(err.logDetail).toEqual({ host: 'rebind.example', address: '10.1.2.3', addressClass: 'private' });
  });
});

describe('connectLookup', () => {
  type Answer = { err: NodeJS.ErrnoException | null; address: string | dns.LookupAddress[]; family?: number };
  const lookupWith = (answers: string[], guard = true) => {
    const resolve = async () =>
      answers.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    const lookup = connectLookup(resolve, guard);
    return (options: dns.LookupOptions) =>
      new Promise<Answer>((done) =>
        lookup('hooks.example', options, (err, address, family) => done({ err, address, family })),
      );
  };

  it('hands the checked public addresses to the socket, one or all', async () => {
    const lookup = lookupWith(['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c']);
    expect(await lookup({})).toEqual({ err: null, address: '93.184.215.14', family: 4 });
    expect(await lookup({ family: 6 })).toEqual({
      err: null,
      address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c',
      family: 6,
    });
    expect((await lookup({ all: true })).address).toHaveLength(2);
  });

  it('refuses when any answer is not public, whatever the family asked for', async () => {
    for (const answers of [['127.0.0.1'], ['93.184.215.14', '10.0.0.1'], ['93.184.215.14', '::1']]) {
      const { err } = await lookupWith(answers)({ family: 4 });
      expect(err, answers.join()).toBeInstanceOf(BlockedAddressError);
    }
  });

  it('lets private answers through when not guarding (LIVELINE_WEBHOOK_ALLOW_PRIVATE)', async () => {
    expect(await lookupWith(['127.0.0.1'], false)({})).toEqual({
      err: null,
      address: '127.0.0.1',
      family: 4,
    });
  });

  it('answers ENOTFOUND when no address of the family is left, and passes resolver errors on', async () => {
    expect((await lookupWith(['93.184.215.14'])({ family: 6 })).err?.code).toBe('ENOTFOUND');
    const failing = connectLookup(async () => {
      throw Object.assign(new Error('queryA ESERVFAIL'), { code: 'ESERVFAIL' });
    }, true);
    const err = await new Promise<NodeJS.ErrnoException | null>((done) =>
      failing('x.example', {}, (e) => done(e)),
    );
    expect(err?.code).toBe('ESERVFAIL');
  });
});
