// Idle device sockets at fleet scale: 15,000 sessions, each with its realtime socket open and nothing
// sent but the SDK's heartbeats (every `heartbeatIntervalMs` of the welcome; the server pings at the
// same interval and `ws` answers). Reports the server's memory growth per socket (RSS and JS heap,
// each after a full GC in the server, taken over IPC) and the server's CPU while idle (% of one core,
// from /proc/<pid>/stat over the idle window).
//
//   node --import tsx bench/idle-sockets.ts [--sockets 15000] [--idle-seconds 30]
//
// liveline runs in a child process (bench/lib/procs.ts); this process holds every client socket
// (under the 20,000 open-file limit of one process). Tokens and sessions are made through the API by
// a first server process; a second one on the same store holds the sockets and is measured.
// Progress and the summary on stderr, one JSON line on stdout.
import { parseArgs } from 'node:util';
import { createBenchTenant, createSessions, openDevices, wsBase } from './lib/fleet.ts';
import {
  type Backend,
  cpuMeter,
  type MemoryReport,
  machine,
  openFileLimit,
  rssBytes,
  runMain,
  sharedStore,
  sleep,
  startLiveline,
} from './lib/procs.ts';

const { values: args } = parseArgs({
  options: {
    sockets: { type: 'string', default: process.env.BENCH_IDLE_SOCKETS ?? '15000' },
    'idle-seconds': { type: 'string', default: '30' },
    concurrency: { type: 'string', default: '100' },
  },
});
const backend = (process.env.BENCH_BACKEND ?? 'sqlite') as Backend;
const count = Number(args.sockets);
const idleSeconds = Number(args['idle-seconds']);
const concurrency = Number(args.concurrency);
const log = (line: string) => process.stderr.write(`${line}\n`);
const kib = (bytes: number) => Number((bytes / 1024).toFixed(2));
const mib = (bytes: number) => Number((bytes / 2 ** 20).toFixed(1));

runMain('idle-sockets', 15 * 60, async () => {
  const info = machine();
  log(`idle-sockets: ${JSON.stringify(info)} backend ${backend}, ${count} sockets`);
  const ownLimit = openFileLimit();
  if (ownLimit < count + 500)
    throw new Error(`this process may open ${ownLimit} files; ${count} sockets need more (ulimit -n)`);

  // Sessions are made by a first server process; the sockets are measured on a second one started on
  // the same store, so its baseline is not inflated by the heap the 2×15,000 API calls left behind.
  const store = sharedStore(backend);
  const adminToken = `bench-admin-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
  const maker = await startLiveline({
    backend,
    dataDir: store.dataDir,
    sharedSchema: store.schema,
    adminToken,
  });
  const t0 = performance.now();
  const tenant = await createBenchTenant(maker.url, adminToken);
  const made = await createSessions(maker.url, maker.url, tenant, count, {
    prefix: 'idle',
    concurrency: 32,
    onProgress: (done) => {
      if (done % 5000 === 0) log(`  ${done} tokens and sessions`);
    },
  });
  const setupS = (performance.now() - t0) / 1000;
  log(`${count} device tokens and sessions in ${setupS.toFixed(1)} s`);
  await maker.stop();

  const server = await startLiveline({
    backend,
    dataDir: store.dataDir,
    sharedSchema: store.schema,
    adminToken,
  });
  const specs = made.map((d) => ({ ...d, wsUrl: d.wsUrl.replace(wsBase(maker.url), wsBase(server.url)) }));
  const serverLimit = openFileLimit(server.pid);
  if (serverLimit < count + 500)
    throw new Error(`the server may open ${serverLimit} files; ${count} sockets need more (ulimit -n)`);

  // Warm the socket path (code loaded and compiled) before the baseline, then close those sockets.
  const warm = await openDevices(specs.slice(0, 200), null, concurrency);
  for (const d of warm) d.close();
  await sleep(3000);
  const before = await server.memory();
  log(`server before sockets: rss ${mib(before.rss)} MiB, heap ${mib(before.heapUsed)} MiB`);

  const t1 = performance.now();
  const devices = await openDevices(specs, null, concurrency);
  const openS = (performance.now() - t1) / 1000;
  log(`${devices.length} sockets open (welcome received) in ${openS.toFixed(1)} s`);
  const heartbeatMs = devices[0]?.heartbeatIntervalMs ?? 0;

  await sleep(5000);
  const afterOpen = await server.memory();

  log(`idle for ${idleSeconds} s (heartbeats every ${heartbeatMs} ms per socket)`);
  const serverCpu = cpuMeter(server.pid);
  const selfCpu0 = process.cpuUsage();
  const idleStart = performance.now();
  const rssSamples: number[] = [];
  while (performance.now() - idleStart < idleSeconds * 1000) {
    await sleep(1000);
    rssSamples.push(rssBytes(server.pid));
  }
  const idleCpu = serverCpu.stop();
  const self = process.cpuUsage(selfCpu0);
  const generatorCpu = Number(
    (((self.user + self.system) / 1e6 / ((performance.now() - idleStart) / 1000)) * 100).toFixed(1),
  );
  const afterIdle = await server.memory();
  const stillOpen = devices.filter((d) => d.ws.readyState === d.ws.OPEN).length;

  const growth = (m: MemoryReport) => ({
    rssKiB: kib((m.rss - before.rss) / count),
    heapUsedKiB: kib((m.heapUsed - before.heapUsed) / count),
    externalKiB: kib((m.external - before.external) / count),
  });
  const perSocket = { afterOpen: growth(afterOpen), afterIdle: growth(afterIdle) };
  const memory = (m: MemoryReport) => ({
    rssMiB: mib(m.rss),
    heapUsedMiB: mib(m.heapUsed),
    externalMiB: mib(m.external),
  });

  log('');
  log(
    `idle-sockets (one liveline process, ${backend}; commit ${info.commit}; ${info.nproc} cores, node ${info.node})`,
  );
  log(`  sockets ${count}, still open after idling ${stillOpen}`);
  log(
    `  server memory: before ${JSON.stringify(memory(before))}, after open ${JSON.stringify(memory(afterOpen))}, after idle ${JSON.stringify(memory(afterIdle))}`,
  );
  log(
    `  per socket (after idle): rss ${perSocket.afterIdle.rssKiB} KiB, heap ${perSocket.afterIdle.heapUsedKiB} KiB, external ${perSocket.afterIdle.externalKiB} KiB (after open: rss ${perSocket.afterOpen.rssKiB}, heap ${perSocket.afterOpen.heapUsedKiB})`,
  );
  log(`  server CPU while idle: ${idleCpu}% of one core over ${idleSeconds} s (generator ${generatorCpu}%)`);
  log(
    `  targets: ≤ 12 KiB per socket (rss) ${perSocket.afterIdle.rssKiB <= 12 ? 'met' : 'NOT met'}; idle CPU < 10% ${idleCpu < 10 ? 'met' : 'NOT met'}`,
  );
  process.stdout.write(
    `${JSON.stringify({
      benchmark: 'idle-sockets',
      backend,
      ...info,
      sockets: count,
      stillOpen,
      heartbeatIntervalMs: heartbeatMs,
      setupSeconds: Number(setupS.toFixed(1)),
      openSeconds: Number(openS.toFixed(1)),
      serverMemory: { before: memory(before), afterOpen: memory(afterOpen), afterIdle: memory(afterIdle) },
      perSocket,
      idleSeconds,
      serverCpuPercent: idleCpu,
      serverRssMaxMiB: mib(Math.max(...rssSamples)),
      generatorCpuPercent: generatorCpu,
    })}\n`,
  );
  for (const d of devices) d.close();
});
