// The open-loop command generator shared by liveline and the bare relay (bench/command-load.ts).
// Request i is due at start + i/rate: every tick sends all requests that are due, whether or not
// earlier ones have been answered (undici Pool, keep-alive, `connections` sockets; requests beyond
// them wait in the pool's queue, and that wait counts). Latency is taken from the request's
// *scheduled* time to the device's receipt of the frame, so a slow server or a slow generator shows up
// in the figures instead of silently lowering the rate (no coordinated omission). Commands go
// round-robin over the devices; each carries `<run>.<i>` as its text, which the device reports back.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Pool } from 'undici';
import type { DeviceSocket } from './fleet.ts';
import { cpuMeter, waitMeter } from './procs.ts';

export interface Target {
  label: string;
  /** Where commands are sent (liveline: server B of --servers). */
  commandUrl: string;
  /** Tenant token (liveline) or none (relay). */
  token?: string;
  /** Pid of the target's process on this machine, to report its CPU; null for external servers. */
  pid: number | null;
  /** Every process of a deployment of several (--cross), by name: each one's CPU is reported. */
  processes?: Record<string, number>;
}

export interface LoadOptions {
  /** Keep-alive connections of the run's HTTP pool. */
  connections: number;
  rate: number;
  seconds: number;
  /** How long to wait after the last scheduled send for answers and frames still under way. */
  drainMs: number;
}

export interface LoadResult {
  target: string;
  rate: number;
  seconds: number;
  devices: number;
  sent: number;
  accepted202: number;
  otherStatus: Record<string, number>;
  transportErrors: number;
  /** Requests with no answer by the end of the drain (aborted). */
  unanswered: number;
  received: number;
  lost: number;
  duplicates: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  /** Actual send → receipt: leaves out how late the generator sent (secondary; the schedule is the figure). */
  fromSendMs: { p50: number; p99: number };
  /** Scheduled start → the 202 (for comparison; the figure that matters is the device's receipt). */
  http202Ms: { p50: number; p99: number };
  /** Sends per second actually made over the sending window (below `rate`: the generator lagged). */
  sendRate: number;
  /** Frames received per second, from the first due time to the last receipt. */
  achievedRate: number;
  /** How late the generator issued requests relative to their schedule. */
  sendLagMs: { p99: number; max: number };
  generator: {
    cpuPercent: number;
    /** Runnable but not running (other processes had the CPUs), % of the window. */
    runQueueWaitPercent: number;
    eventLoopDelayMs: { p50: number; p99: number; max: number };
  };
  targetCpuPercent: number | null;
  targetRunQueueWaitPercent: number | null;
  /** CPU of each process of the deployment (`Target.processes`), % of a core; null for one process. */
  processCpuPercent: Record<string, number> | null;
  /** The generator used ≥ 90% of a core: the load generator itself may be the bottleneck. */
  generatorSaturated: boolean;
  /** Requests went out late (send lag p99 > 5 ms): their delay is part of the latencies. */
  generatorLate: boolean;
  firstError?: string;
}

/** Collects frames for the run in progress; the devices' `onCommand` calls `deliver`. */
export class Receipts {
  private runs = new Map<string, { at: Float64Array; duplicates: number; count: number; last: number }>();

  begin(run: string, total: number) {
    const state = { at: new Float64Array(total).fill(Number.NaN), duplicates: 0, count: 0, last: 0 };
    this.runs.set(run, state);
    return state;
  }

  end(run: string) {
    this.runs.delete(run);
  }

  deliver = (data: string, receivedAt: number) => {
    const dot = data.lastIndexOf('.');
    const state = this.runs.get(data.slice(0, dot));
    if (!state) return;
    const i = Number(data.slice(dot + 1));
    if (!Number.isNaN(state.at[i])) {
      state.duplicates++;
      return;
    }
    state.at[i] = receivedAt;
    state.count++;
    state.last = receivedAt;
  };
}

const round = (x: number) => (Number.isFinite(x) ? Number(x.toFixed(2)) : Number.NaN);

function quantile(sorted: Float64Array, q: number) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

let runCounter = 0;

/**
 * One open-loop run against `target`: `rate` commands/s for `seconds` s round-robin over `devices`.
 * The devices must have been opened with `receipts.deliver` as their command callback. Each run has
 * its own pool, destroyed at the end: requests still queued after the drain are dropped (counted as
 * unanswered and lost), so a backlog never spills into the next run.
 */
export async function runLoad(
  target: Target,
  devices: DeviceSocket[],
  receipts: Receipts,
  options: LoadOptions,
): Promise<LoadResult> {
  const total = Math.max(1, Math.round(options.rate * options.seconds));
  const interval = 1000 / options.rate;
  const run = `r${++runCounter}${Math.random().toString(36).slice(2, 6)}`;
  const state = receipts.begin(run, total);
  const sentAt = new Float64Array(total).fill(Number.NaN);
  const answeredAt = new Float64Array(total).fill(Number.NaN);
  const other: Record<string, number> = {};
  let accepted = 0;
  let transportErrors = 0;
  let answered = 0;
  let firstError: string | undefined;
  let aborting = false;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (target.token) headers.authorization = `Bearer ${target.token}`;
  const pool = new Pool(target.commandUrl, {
    connections: options.connections,
    pipelining: 1,
    keepAliveTimeout: 60_000,
  });
  const paths = devices.map((d) => `/sessions/${d.spec.sessionId}/realtime/commands`);

  const send = (i: number) => {
    sentAt[i] = performance.now();
    pool
      .request({
        method: 'POST',
        path: paths[i % paths.length],
        headers,
        body: `{"name":"text","data":"${run}.${i}"}`,
      })
      .then(
        async (res) => {
          answeredAt[i] = performance.now();
          if (res.statusCode === 202) {
            accepted++;
            await res.body.dump();
          } else {
            other[res.statusCode] = (other[res.statusCode] ?? 0) + 1;
            const text = await res.body.text();
            firstError ??= `HTTP ${res.statusCode}: ${text.slice(0, 300)}`;
          }
        },
        (err: unknown) => {
          if (aborting) return;
          transportErrors++;
          firstError ??= err instanceof Error ? err.message : String(err);
        },
      )
      .finally(() => {
        answered++;
      });
  };

  const eld = monitorEventLoopDelay({ resolution: 5 });
  const selfCpu0 = process.cpuUsage();
  const targetCpu = target.pid ? cpuMeter(target.pid) : null;
  const targetWait = target.pid ? waitMeter(target.pid) : null;
  const processCpu = target.processes
    ? Object.entries(target.processes).map(([name, pid]) => [name, cpuMeter(pid)] as const)
    : null;
  const selfWait = waitMeter('self');
  const start = performance.now() + 20;
  let next = 0;
  eld.enable();
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (next < total && start + next * interval <= now) send(next++);
      if (next >= total) {
        resolve();
        return;
      }
      setTimeout(tick, Math.max(0, start + next * interval - performance.now()));
    };
    setTimeout(tick, 20);
  });
  const sendEnd = performance.now();
  const wall = (sendEnd - start) / 1000;
  const selfCpu = process.cpuUsage(selfCpu0);
  const generatorCpu = ((selfCpu.user + selfCpu.system) / 1e6 / wall) * 100;
  const targetCpuPercent = targetCpu ? targetCpu.stop() : null;
  const targetRunQueueWaitPercent = targetWait ? targetWait.stop() : null;
  const processCpuPercent = processCpu
    ? Object.fromEntries(processCpu.map(([name, meter]) => [name, meter.stop()]))
    : null;
  const selfWaitPercent = selfWait.stop();
  eld.disable();

  // Drain: answers and frames still under way, bounded.
  const deadline = sendEnd + options.drainMs;
  while (performance.now() < deadline && (answered < total || state.count < accepted)) {
    await new Promise((r) => setTimeout(r, 20));
  }
  receipts.end(run);
  const unanswered = total - answered;
  aborting = true;
  await pool.destroy().catch(() => {});

  const latencies = new Float64Array(state.count);
  const fromSend = new Float64Array(state.count);
  const lags = new Float64Array(total);
  const http = new Float64Array(accepted);
  let n = 0;
  let h = 0;
  for (let i = 0; i < total; i++) {
    const due = start + i * interval;
    lags[i] = sentAt[i] - due;
    if (!Number.isNaN(state.at[i]) && n < latencies.length) {
      fromSend[n] = state.at[i] - sentAt[i];
      latencies[n++] = state.at[i] - due;
    }
    if (!Number.isNaN(answeredAt[i]) && h < http.length) http[h++] = answeredAt[i] - due;
  }
  // BENCH_TIMELINE=1: the run's latency over time on stderr, `<second>:<p50>/<max>` per quarter second
  // of scheduled start (a backlog left by the warm-up, a stall, a slow drift show where they happen).
  if (process.env.BENCH_TIMELINE)
    process.stderr.write(`timeline ${target.label}: ${timeline(state.at, start, interval)}\n`);
  latencies.sort();
  fromSend.sort();
  lags.sort();
  http.sort();
  const lagP99 = quantile(lags, 0.99);
  const generatorSaturated = generatorCpu >= 90;
  return {
    target: target.label,
    rate: options.rate,
    seconds: options.seconds,
    devices: devices.length,
    sent: total,
    accepted202: accepted,
    otherStatus: other,
    transportErrors,
    unanswered,
    received: state.count,
    lost: total - state.count,
    duplicates: state.duplicates,
    latencyMs: {
      p50: round(quantile(latencies, 0.5)),
      p90: round(quantile(latencies, 0.9)),
      p99: round(quantile(latencies, 0.99)),
      max: round(latencies[latencies.length - 1]),
    },
    fromSendMs: { p50: round(quantile(fromSend, 0.5)), p99: round(quantile(fromSend, 0.99)) },
    http202Ms: { p50: round(quantile(http, 0.5)), p99: round(quantile(http, 0.99)) },
    sendRate: total > 1 ? Math.round((total - 1) / ((sentAt[total - 1] - sentAt[0]) / 1000)) : options.rate,
    achievedRate: state.count > 0 ? Math.round(state.count / ((state.last - start) / 1000)) : 0,
    sendLagMs: { p99: round(lagP99), max: round(lags[total - 1]) },
    generator: {
      cpuPercent: round(generatorCpu),
      runQueueWaitPercent: selfWaitPercent,
      eventLoopDelayMs: {
        p50: round(eld.percentile(50) / 1e6),
        p99: round(eld.percentile(99) / 1e6),
        max: round(eld.max / 1e6),
      },
    },
    targetCpuPercent,
    targetRunQueueWaitPercent,
    processCpuPercent,
    generatorSaturated,
    generatorLate: lagP99 > 5,
    ...(firstError ? { firstError } : {}),
  };
}

/** Latency by quarter second of scheduled start: `<second>:<p50>/<max>` each (ms), for BENCH_TIMELINE. */
function timeline(at: Float64Array, start: number, interval: number): string {
  const buckets = new Map<number, number[]>();
  for (let i = 0; i < at.length; i++) {
    if (Number.isNaN(at[i])) continue;
    const bucket = Math.floor((i * interval) / 250);
    const list = buckets.get(bucket) ?? [];
    list.push(at[i] - (start + i * interval));
    buckets.set(bucket, list);
  }
  return [...buckets]
    .map(([bucket, list]) => {
      list.sort((x, y) => x - y);
      return `${(bucket / 4).toFixed(2)}:${list[Math.floor(list.length / 2)].toFixed(0)}/${list[list.length - 1].toFixed(0)}`;
    })
    .join(' ');
}
