import { describe, expect, it } from 'vitest';
import { HealthSampler } from '../src/health.ts';

/** The sampler reads the platform it is given: here, stand-ins for Node's and a browser's APIs. */
describe('built-in Health sampling', () => {
  it('reads memory (rss, MB), CPU share and the Battery Status API where present', async () => {
    let now = 0;
    let cpu = 0;
    const sampler = new HealthSampler(() => now, {
      process: {
        memoryUsage: () => ({ rss: 256 * 1024 * 1024 }),
        cpuUsage: (previous) => ({ user: cpu - (previous?.user ?? 0), system: 0 }),
      },
      navigator: { getBattery: async () => ({ level: 0.42 }) },
    });
    now = 1000;
    cpu = 250_000; // 250 ms of CPU in 1 s
    expect(await sampler.sample()).toEqual({ memoryUsage: 256, cpuUsage: 25, batteryLevel: 42 });
  });

  it('uses the JS heap in browsers, counts frames per second, leaves out what is missing', async () => {
    let now = 0;
    const sampler = new HealthSampler(() => now, {
      performance: { memory: { usedJSHeapSize: 10 * 1024 * 1024 } },
    });
    for (let i = 0; i < 90; i++) sampler.frame();
    now = 1500;
    expect(await sampler.sample()).toEqual({ memoryUsage: 10, fps: 60 });
    now = 2500;
    expect(await sampler.sample()).toEqual({ memoryUsage: 10 }); // no frames since
    const bare = new HealthSampler(() => 0, {
      navigator: { getBattery: () => Promise.reject(new Error('denied')) },
    });
    expect(await bare.sample()).toEqual({});
  });
});
