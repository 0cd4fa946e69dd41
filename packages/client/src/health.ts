import type { ClientEventFields } from './events.ts';

/** The fields of a `Health` event. */
export type HealthFields = ClientEventFields['Health'];

/** Adds to or overrides the built-in Health fields; return the fields to send. */
export type HealthHook = (fields: HealthFields) => HealthFields | Promise<HealthFields>;

const MiB = 1024 * 1024;
const round1 = (n: number) => Math.round(n * 10) / 10;

/** The platform's APIs the sampler reads, each one optional: what is missing is left out. */
interface Platform {
  process?: {
    memoryUsage?: () => { rss: number };
    cpuUsage?: (previous?: { user: number; system: number }) => { user: number; system: number };
  };
  performance?: { memory?: { usedJSHeapSize?: number } };
  navigator?: { getBattery?: () => Promise<{ level: number }> };
}

/**
 * What the SDK reports by itself in its built-in `Health` event, from whatever the platform exposes
 * (packages/client/README.md, "Built-in Health"):
 * - `memoryUsage` (MB): the process's resident set on Node (`process.memoryUsage().rss`), the JS heap
 *   in browsers that have `performance.memory` (Chromium);
 * - `cpuUsage` (0–100): on Node, the process's CPU time over the wall time since the last sample (one
 *   busy core is 100; capped at 100);
 * - `fps`: frames the app reported with `device.frame()` since the last sample, per second (only once
 *   the app reports frames);
 * - `batteryLevel` (0–100): the Battery Status API (`navigator.getBattery()`) where present.
 */
export class HealthSampler {
  private frames = 0;
  private framesSince: number;
  private cpuSince: { at: number; usage: { user: number; system: number } } | null = null;

  constructor(
    private readonly now: () => number,
    private readonly platform: Platform = globalThis as Platform,
  ) {
    this.framesSince = now();
    const cpu = this.platform.process?.cpuUsage;
    if (cpu) this.cpuSince = { at: now(), usage: cpu() };
  }

  /** The app rendered a frame. */
  frame(): void {
    this.frames++;
  }

  /** One sample; resets the frame and CPU windows. */
  async sample(): Promise<HealthFields> {
    const fields: HealthFields = {};
    const now = this.now();
    const memory = this.memoryMb();
    if (memory !== undefined) fields.memoryUsage = memory;
    const cpu = this.cpuPercent(now);
    if (cpu !== undefined) fields.cpuUsage = cpu;
    const elapsed = (now - this.framesSince) / 1000;
    if (this.frames > 0 && elapsed > 0) fields.fps = round1(this.frames / elapsed);
    this.frames = 0;
    this.framesSince = now;
    const battery = await this.batteryPercent();
    if (battery !== undefined) fields.batteryLevel = battery;
    return fields;
  }

  private memoryMb(): number | undefined {
    try {
      const rss = this.platform.process?.memoryUsage?.().rss;
      if (typeof rss === 'number') return round1(rss / MiB);
      const heap = this.platform.performance?.memory?.usedJSHeapSize;
      if (typeof heap === 'number') return round1(heap / MiB);
    } catch {
      // A sandbox may forbid it: the field is left out.
    }
    return undefined;
  }

  private cpuPercent(now: number): number | undefined {
    const cpu = this.platform.process?.cpuUsage;
    if (!cpu || !this.cpuSince) return undefined;
    const delta = cpu(this.cpuSince.usage);
    const wallUs = (now - this.cpuSince.at) * 1000;
    this.cpuSince = { at: now, usage: cpu() };
    if (wallUs <= 0) return undefined;
    return Math.min(100, round1(((delta.user + delta.system) / wallUs) * 100));
  }

  private async batteryPercent(): Promise<number | undefined> {
    const getBattery = this.platform.navigator?.getBattery;
    if (typeof getBattery !== 'function') return undefined;
    try {
      const battery = await getBattery.call(this.platform.navigator);
      const level = battery.level;
      return typeof level === 'number' && level >= 0 && level <= 1 ? Math.round(level * 100) : undefined;
    } catch {
      return undefined;
    }
  }
}
