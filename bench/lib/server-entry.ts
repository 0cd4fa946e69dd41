// The server process of the fleet benchmarks: `liveline start` (the same `runServer` the CLI calls,
// settings from the environment) plus an IPC channel to the benchmark that started it. It tells the
// benchmark its URL, answers memory probes (after a full GC when started with --expose-gc), and exits
// when the benchmark goes away, so a killed benchmark never leaves a server behind.
import { runServer } from '../../packages/server/src/cli/run-server.ts';

if (!process.send) throw new Error('server-entry.ts runs as a child with an IPC channel (see procs.ts)');

const server = await runServer();
process.send({ type: 'ready', url: server.url });

process.on('message', (message: { type?: string }) => {
  if (message.type !== 'memory') return;
  globalThis.gc?.();
  const m = process.memoryUsage();
  process.send?.({
    type: 'memory',
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
  });
});
process.on('disconnect', () => {
  server.close().finally(() => process.exit(0));
  setTimeout(() => process.exit(1), 5000).unref();
});
