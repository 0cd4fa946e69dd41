// Commands at fleet scale: open-loop command load over real WebSockets, liveline next to the bare
// relay (bench/relay.ts) measured in the same run with the same generator.
//
//   node --import tsx bench/command-load.ts                 # 1,000 devices, 2,000 cmd/s for 10 s, both targets
//   node --import tsx bench/command-load.ts --find-max      # highest rate with p99 < 50 ms, 2k, 4k, 6k, …
//   node --import tsx bench/command-load.ts --servers http://127.0.0.1:8080,http://127.0.0.1:8081 \
//        --admin-token $LIVELINE_ADMIN_TOKEN                # devices on A, commands through B (running servers)
//   node --import tsx bench/command-load.ts --cross         # starts two liveline processes sharing
//                                                           # REDIS_URL + DATABASE_URL, then as --servers;
//                                                           # the relays run as pairs over that Redis
//   node --import tsx bench/command-load.ts --cross --bystanders 2  # and two more in the deployment
//                                                           # that hold no device and take no command
//   node --import tsx bench/command-load.ts --durable-relay # and the durable relay (relay.ts) between
//                                                           # them: the floor of a durable command path
//   node --import tsx bench/command-load.ts --stored-sessions 200000  # the store holds that many ended
//                                                           # sessions of the tenant first (a history)
//
// This process is the load generator: it holds the device sockets and the HTTP client; liveline and
// the relay each run in a child process of their own (bench/lib/procs.ts). Latency is from a
// request's scheduled start to the device's receipt of the `command` frame (bench/lib/load.ts).
// Prints progress and a readable summary on stderr, one JSON line per result on stdout.
import { parseArgs } from 'node:util';
import {
  createBenchTenant,
  createSessions,
  type DeviceSocket,
  openDevices,
  relayDevices,
} from './lib/fleet.ts';
import { type LoadResult, Receipts, runLoad, type Target } from './lib/load.ts';
import {
  type Backend,
  dropSchema,
  type LivelineServer,
  machine,
  onCleanup,
  runMain,
  sleep,
  startLiveline,
  startRelay,
} from './lib/procs.ts';
import { seedEndedSessions } from './lib/seed.ts';

const { values: args } = parseArgs({
  options: {
    devices: { type: 'string', default: process.env.BENCH_FLEET_DEVICES ?? '1000' },
    rate: { type: 'string', default: process.env.BENCH_RATE ?? '2000' },
    seconds: { type: 'string', default: process.env.BENCH_SECONDS ?? '10' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '128' },
    'drain-ms': { type: 'string', default: '10000' },
    only: { type: 'string' },
    relay: { type: 'boolean', default: false },
    'durable-relay': { type: 'boolean', default: false },
    'find-max': { type: 'boolean', default: false },
    'start-rate': { type: 'string', default: '2000' },
    'step-rate': { type: 'string', default: '2000' },
    'max-rate': { type: 'string', default: '30000' },
    'step-seconds': { type: 'string', default: '5' },
    'p99-limit-ms': { type: 'string', default: '50' },
    servers: { type: 'string' },
    'admin-token': { type: 'string' },
    cross: { type: 'boolean', default: false },
    bystanders: { type: 'string', default: '0' },
    'stored-sessions': { type: 'string', default: '0' },
  },
});

const backend = (process.env.BENCH_BACKEND ?? 'sqlite') as Backend;
/** The store of the measured liveline: BENCH_BACKEND, PostgreSQL with --cross, unknown with --servers. */
const store = args.servers ? 'external' : args.cross ? 'postgres' : backend;
const devicesCount = Number(args.devices);
const rate = Number(args.rate);
const seconds = Number(args.seconds);
const storedSessions = Number(args['stored-sessions']);
const warmupSeconds = Number(args.warmup);
const connections = Number(args.connections);
const drainMs = Number(args['drain-ms']);
const p99Limit = Number(args['p99-limit-ms']);
// --relay alone measures only the relay; --only liveline|relay picks one; default both.
const only = args.only ?? (args.relay ? 'relay' : undefined);
const wantLiveline = only !== 'relay';
const wantRelay = only !== 'liveline';

const log = (line: string) => process.stderr.write(`${line}\n`);
const emit = (record: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(record)}\n`);

interface Driven {
  target: Target;
  devices: DeviceSocket[];
}

/** The liveline side: a spawned server (or two with --cross), or --servers A,B already running. */
async function setUpLiveline(receipts: Receipts): Promise<Driven & { description: string }> {
  let socketBase: string;
  let commandBase: string;
  let adminToken: string;
  let pid: number | null = null;
  let processes: Record<string, number> | undefined;
  let description: string;
  let server: LivelineServer | undefined;
  if (args.servers) {
    const [a, b] = args.servers.split(',').map((s) => s.trim().replace(/\/$/, ''));
    socketBase = a;
    commandBase = b ?? a;
    adminToken = args['admin-token'] ?? process.env.LIVELINE_ADMIN_TOKEN ?? '';
    if (!adminToken) throw new Error('--servers needs --admin-token (or LIVELINE_ADMIN_TOKEN)');
    for (const u of [socketBase, commandBase])
      if (!/^http:\/\/(127\.0\.0\.1|localhost)[:/]/.test(`${u}/`))
        throw new Error(`--servers: only 127.0.0.1 is allowed, got ${u}`);
    description = `running servers: devices on ${socketBase}, commands through ${commandBase}`;
  } else if (args.cross) {
    if (!process.env.DATABASE_URL || !process.env.REDIS_URL)
      throw new Error('--cross needs DATABASE_URL and REDIS_URL (two processes sharing one store and bus)');
    const schema = `bench_x${Math.random().toString(16).slice(2, 10)}`;
    // Its own key prefix on the Redis server, so other users of that server are not disturbed.
    const bus = { REDIS_URL: process.env.REDIS_URL, LIVELINE_REDIS_PREFIX: `${schema}:` };
    // Registered first so it runs last, after both servers stopped (cleanups run in reverse).
    onCleanup(() => dropSchema(schema));
    const a = await startLiveline({
      backend: 'postgres',
      sharedSchema: schema,
      env: bus,
      label: 'liveline A',
    });
    const b = await startLiveline({
      backend: 'postgres',
      sharedSchema: schema,
      adminToken: a.adminToken,
      env: bus,
      label: 'liveline B',
    });
    // Processes of the deployment that hold no device and take no command: what the others' traffic costs them.
    const bystanders: LivelineServer[] = [];
    for (let i = 1; i <= Number(args.bystanders); i++)
      bystanders.push(
        await startLiveline({
          backend: 'postgres',
          sharedSchema: schema,
          adminToken: a.adminToken,
          env: bus,
          label: `liveline C${i}`,
        }),
      );
    socketBase = a.url;
    commandBase = b.url;
    adminToken = a.adminToken;
    pid = b.pid;
    processes = { A: a.pid, B: b.pid, ...Object.fromEntries(bystanders.map((c, i) => [`C${i + 1}`, c.pid])) };
    description =
      `${2 + bystanders.length} processes sharing REDIS_URL + PostgreSQL schema ${schema}: devices on A, ` +
      `commands through B${bystanders.length > 0 ? `, ${bystanders.length} bystander(s) C` : ''} (server CPU is B's)`;
  } else {
    server = await startLiveline({ backend });
    socketBase = server.url;
    commandBase = server.url;
    adminToken = server.adminToken;
    pid = server.pid;
    description = `one liveline process (${backend}${storedSessions > 0 ? `, ${storedSessions} ended sessions stored` : ''})`;
  }
  const tenant = await createBenchTenant(socketBase, adminToken);
  if (storedSessions > 0) {
    if (!server) throw new Error('--stored-sessions needs one liveline process this benchmark starts');
    const s0 = performance.now();
    await seedEndedSessions(server, tenant.tenantId, storedSessions);
    log(
      `liveline: ${storedSessions} ended sessions stored in ${((performance.now() - s0) / 1000).toFixed(1)} s`,
    );
  }
  const t0 = performance.now();
  const specs = await createSessions(socketBase, socketBase, tenant, devicesCount, { prefix: 'load' });
  const devices = await openDevices(specs, receipts.deliver);
  log(
    `liveline: ${devices.length} devices with sessions and sockets in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  return {
    target: { label: 'liveline', commandUrl: commandBase, token: tenant.token, pid, processes },
    devices,
    description,
  };
}

/**
 * The bare relay, or (`durable`) the durable relay on the store liveline is measured on. With --cross,
 * a pair of them over Redis (relay.ts): devices on A, commands through B, as liveline's processes.
 */
async function setUpRelay(receipts: Receipts, durable = false): Promise<Driven> {
  const label = durable ? 'durable' : 'relay';
  if (!args.cross) {
    const relay = await startRelay(durable ? { durable: backend } : {});
    const devices = await openDevices(relayDevices(relay.url, devicesCount), receipts.deliver);
    return { target: { label, commandUrl: relay.url, pid: relay.pid }, devices };
  }
  const schema = `bench_r${Math.random().toString(16).slice(2, 10)}`;
  if (durable) onCleanup(() => dropSchema(schema));
  const env = { RELAY_REDIS_URL: process.env.REDIS_URL ?? '', RELAY_REDIS_CHANNEL: `${schema}:relay` };
  const start = (side: string) =>
    startRelay({
      ...(durable ? { durable: 'postgres' as const, sharedSchema: schema } : {}),
      env,
      label: `${label} ${side}`,
    });
  const a = await start('A');
  const b = await start('B');
  const devices = await openDevices(relayDevices(a.url, devicesCount), receipts.deliver);
  return {
    target: { label, commandUrl: b.url, pid: b.pid, processes: { A: a.pid, B: b.pid } },
    devices,
  };
}

const ratio = (a: number, b: number) => (b > 0 && Number.isFinite(a) ? Number((a / b).toFixed(2)) : null);

function row(r: LoadResult) {
  const l = r.latencyMs;
  return [
    r.target.padEnd(9),
    `${r.rate}/s`.padStart(8),
    `sent ${r.sent}`,
    `202 ${r.accepted202}`,
    `recv ${r.received}`,
    `lost ${r.lost}${r.unanswered > 0 ? ` (${r.unanswered} unanswered)` : ''}`,
    `p50 ${l.p50}`,
    `p90 ${l.p90}`,
    `p99 ${l.p99}`,
    `max ${l.max} ms`,
    `(from send p99 ${r.fromSendMs.p99})`,
    `achieved ${r.achievedRate}/s`,
    `server cpu ${r.targetCpuPercent ?? '?'}% wait ${r.targetRunQueueWaitPercent ?? '?'}%`,
    r.processCpuPercent
      ? `(${Object.entries(r.processCpuPercent)
          .map(([name, cpu]) => `${name} ${cpu}%`)
          .join(', ')})`
      : '',
    `gen cpu ${r.generator.cpuPercent}% wait ${r.generator.runQueueWaitPercent}% lag p99 ${r.sendLagMs.p99} ms`,
    r.generatorSaturated ? 'GENERATOR SATURATED' : r.generatorLate ? 'GENERATOR LATE' : '',
  ].join('  ');
}

function generatorWarning(r: LoadResult) {
  const g = r.generator;
  if (r.generatorSaturated)
    log(
      `  ! ${r.target}: the load generator saturated a core (cpu ${g.cpuPercent}%, send lag p99 ${r.sendLagMs.p99} ms, ` +
        `event-loop delay p99 ${g.eventLoopDelayMs.p99} ms): it may be the bottleneck; its delay is in these figures`,
    );
  else if (r.generatorLate)
    log(
      `  ! ${r.target}: requests went out late (send lag p99 ${r.sendLagMs.p99} ms, event-loop delay p99 ` +
        `${g.eventLoopDelayMs.p99} ms) with the generator at ${g.cpuPercent}% cpu and ${g.runQueueWaitPercent}% ` +
        'waiting for a CPU: the machine was contended (other processes); that delay is in these figures',
    );
}

function passes(r: LoadResult) {
  return (
    r.latencyMs.p99 < p99Limit &&
    r.lost === 0 &&
    r.accepted202 === r.sent &&
    r.sendRate >= 0.95 * r.rate &&
    r.achievedRate >= 0.95 * r.rate
  );
}

/** Steps the rate up until a step fails; when the first step fails, halves it down to find a floor. */
async function findMax(d: Driven, receipts: Receipts) {
  const stepSeconds = Number(args['step-seconds']);
  const steps: LoadResult[] = [];
  const step = async (r: number) => {
    const result = await runLoad(d.target, d.devices, receipts, {
      connections,
      rate: r,
      seconds: stepSeconds,
      drainMs: 5000,
    });
    steps.push(result);
    log(`  ${passes(result) ? 'pass' : 'FAIL'}  ${row(result)}`);
    await sleep(1000);
    return passes(result);
  };
  let best = 0;
  let limitedBy: 'server' | 'generator' | 'max-rate' = 'max-rate';
  /** The failing step ran on a contended machine (generator late or waiting for a CPU > 25% of the time). */
  let contended = false;
  const start = Number(args['start-rate']);
  for (let r = start; r <= Number(args['max-rate']); r += Number(args['step-rate'])) {
    if (await step(r)) best = r;
    else {
      const failed = steps[steps.length - 1];
      limitedBy = failed.generatorSaturated ? 'generator' : 'server';
      contended = failed.generatorLate || failed.generator.runQueueWaitPercent > 25;
      break;
    }
  }
  if (best === 0) {
    for (let r = Math.floor(start / 2); r >= 250; r = Math.floor(r / 2)) {
      if (await step(r)) {
        best = r;
        break;
      }
    }
  }
  return { best, limitedBy, contended, steps };
}

runMain('command-load', 20 * 60, async () => {
  const info = machine();
  log(`command-load: ${JSON.stringify(info)} store ${store}`);
  const receipts = new Receipts();
  let livelineDescription = '';
  // Each target is set up, warmed up and measured in turn, none left idle in between: a process left
  // quiet for the half minute the others take is measured colder (on Node 20, V8 shrinks the young
  // generation of a quiet process, and its first seconds back under load pay for it in GC; see
  // docs/performance.md). Set up together, the last one measured, liveline, looked twice as slow at p99.
  // Relay first, then the durable relay, then liveline, on the same generator.
  const targets: (() => Promise<Driven>)[] = [];
  const driven: Driven[] = [];
  if (wantRelay) targets.push(() => setUpRelay(receipts));
  if (args['durable-relay']) targets.push(() => setUpRelay(receipts, true));
  if (wantLiveline)
    targets.push(async () => {
      const l = await setUpLiveline(receipts);
      livelineDescription = l.description;
      return l;
    });

  // Warm-up at the first rate measured: a warm-up above what the server holds would leave a backlog
  // that the first step then pays for.
  const warmupRate = args['find-max'] ? Math.min(rate, Number(args['start-rate'])) : rate;
  /** Sets the next target up and warms it up. */
  const ready = async (setUp: () => Promise<Driven>) => {
    const d = await setUp();
    driven.push(d);
    log(`warm-up ${d.target.label}: ${warmupSeconds} s at ${warmupRate}/s`);
    await runLoad(d.target, d.devices, receipts, {
      connections,
      rate: warmupRate,
      seconds: warmupSeconds,
      drainMs,
    });
    await sleep(1000);
    return d;
  };

  if (args['find-max']) {
    const found: Record<string, Awaited<ReturnType<typeof findMax>>> = {};
    for (const setUp of targets) {
      const d = await ready(setUp);
      log(
        `find-max ${d.target.label}: steps of ${args['step-seconds']} s from ${args['start-rate']}/s, p99 < ${p99Limit} ms`,
      );
      found[d.target.label] = await findMax(d, receipts);
      log(
        `  ${d.target.label}: highest passing rate ${found[d.target.label].best}/s (limited by ${found[d.target.label].limitedBy}${found[d.target.label].contended ? '; the machine was contended during the failing step' : ''})`,
      );
    }
    emit({
      benchmark: 'command-load-find-max',
      backend: store,
      ...info,
      devices: devicesCount,
      p99LimitMs: p99Limit,
      liveline: found.liveline
        ? {
            maxRate: found.liveline.best,
            limitedBy: found.liveline.limitedBy,
            contended: found.liveline.contended,
          }
        : null,
      relay: found.relay
        ? { maxRate: found.relay.best, limitedBy: found.relay.limitedBy, contended: found.relay.contended }
        : null,
      durableRelay: found.durable
        ? {
            maxRate: found.durable.best,
            limitedBy: found.durable.limitedBy,
            contended: found.durable.contended,
          }
        : null,
      ratio: found.liveline && found.relay ? ratio(found.liveline.best, found.relay.best) : null,
      steps: Object.values(found).flatMap((f) => f.steps),
    });
  } else {
    const results: Record<string, LoadResult> = {};
    for (const setUp of targets) {
      const d = await ready(setUp);
      const label = d.target.label;
      log(`measure ${label}: ${rate}/s for ${seconds} s over ${d.devices.length} devices`);
      results[label] = await runLoad(d.target, d.devices, receipts, {
        connections,
        rate,
        seconds,
        drainMs,
      });
      await sleep(1000);
    }
    const l = results.liveline;
    const r = results.relay;
    const dr = results.durable;
    log('');
    log(
      `command-load (${livelineDescription || 'relay only'}; commit ${info.commit}; ${info.nproc} cores, node ${info.node})`,
    );
    for (const x of [r, dr, l]) if (x) log(`  ${row(x)}`);
    for (const x of [r, dr, l]) if (x) generatorWarning(x);
    const ratios =
      l && r
        ? {
            p50: ratio(l.latencyMs.p50, r.latencyMs.p50),
            p99: ratio(l.latencyMs.p99, r.latencyMs.p99),
            max: ratio(l.latencyMs.max, r.latencyMs.max),
          }
        : null;
    if (ratios) log(`  liveline / relay: p50 ×${ratios.p50}  p99 ×${ratios.p99}  max ×${ratios.max}`);
    const floor =
      dr && r
        ? { p50: ratio(dr.latencyMs.p50, r.latencyMs.p50), p99: ratio(dr.latencyMs.p99, r.latencyMs.p99) }
        : null;
    if (floor) log(`  durable relay / relay: p50 ×${floor.p50}  p99 ×${floor.p99}`);
    const overFloor =
      l && dr
        ? { p50: ratio(l.latencyMs.p50, dr.latencyMs.p50), p99: ratio(l.latencyMs.p99, dr.latencyMs.p99) }
        : null;
    if (overFloor) log(`  liveline / durable relay: p50 ×${overFloor.p50}  p99 ×${overFloor.p99}`);
    if (l && args.cross) {
      log(
        `  targets (across processes): p99 ≤ 10 ms ${l.latencyMs.p99 <= 10 ? 'met' : 'NOT met'}; lost 0 ${l.lost === 0 ? 'met' : 'NOT met'}`,
      );
    } else if (l) {
      const p99ok = l.latencyMs.p99 <= 5;
      const ratioOk = ratios?.p99 !== null && ratios?.p99 !== undefined && ratios.p99 <= 3;
      log(
        `  targets: p99 ≤ 5 ms ${p99ok ? 'met' : 'NOT met'}; p99 ≤ 3× relay ${ratios ? (ratioOk ? 'met' : 'NOT met') : 'not measured'}; lost 0 ${l.lost === 0 ? 'met' : 'NOT met'}`,
      );
    }
    emit({
      benchmark: 'command-load',
      backend: store,
      ...info,
      mode: livelineDescription || 'relay only',
      connections,
      liveline: l ?? null,
      relay: r ?? null,
      durableRelay: dr ?? null,
      ratio: ratios,
      durableRatio: floor,
      overDurable: overFloor,
    });
  }

  for (const d of driven) {
    for (const dev of d.devices) dev.close();
  }
});
