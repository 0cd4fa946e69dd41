import type { Services } from './compose.ts';
import { AUTH_REFRESH_MS } from './modules/auth/index.ts';
import { eventRetentionJob } from './modules/events/index.ts';
import { screenshotOrphansJob } from './modules/screenshots/index.ts';

/**
 * Periodic work of one process (sweeps, expiry, dispatch). Modules describe their jobs; `compose.ts`
 * lists them all and one scheduler starts and stops them, so no timer hides in a plugin or constructor.
 */
export interface Job {
  /** Stable name, used in logs. */
  name: string;
  /** Pause between the end of one run and the start of the next. */
  everyMs: number;
  /** Run once as soon as the scheduler starts (a job a frequently restarted process would otherwise never reach). */
  runAtStart?: boolean;
  run(): Promise<unknown>;
}

export type JobErrorHandler = (err: unknown, job: string) => void;

/** Runs each job every `everyMs`; a run never overlaps the previous run of the same job. */
export class Scheduler {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly running = new Set<Promise<unknown>>();
  private stopped = true;

  constructor(
    readonly jobs: readonly Job[],
    private readonly onError: JobErrorHandler,
  ) {}

  start() {
    this.stopped = false;
    for (const job of this.jobs) this.schedule(job, job.runAtStart ? 0 : job.everyMs);
  }

  /** Stops scheduling and waits for runs under way. */
  async stop() {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await Promise.allSettled([...this.running]);
  }

  private schedule(job: Job, delayMs = job.everyMs) {
    if (this.stopped) return;
    const timer = setTimeout(() => {
      const run = job
        .run()
        .catch((err) => this.onError(err, job.name))
        .finally(() => {
          this.running.delete(run);
          this.schedule(job);
        });
      this.running.add(run);
    }, delayMs);
    timer.unref();
    this.timers.set(job.name, timer);
  }
}

/** Long-running work that paces itself (the webhook dispatcher's claim loop): started and stopped with the jobs. */
export interface Worker {
  name: string;
  start(): void;
  stop(): Promise<void>;
}

/** Every periodic job of a server process. */
export function jobsOf({
  config,
  sessions,
  liveSessions,
  streams,
  commands,
  delivery,
  hub,
  tail,
  presence,
  webhooks,
  auth,
  retention,
  screenshots,
  players,
  logger,
}: Services): Job[] {
  const idleMs = config.sessionIdleTimeoutS * 1000;
  const graceMs = config.streamGraceS * 1000;
  /** The revocations version of the last token check (`AuthService.passRefusal`). */
  let revocationsSeen = -1;
  return [
    // Sessions without device contact for the idle timeout are ended by the server.
    {
      name: 'sessions.idle-sweep',
      everyMs: Math.min(30_000, Math.max(250, idleMs / 4)),
      run: () => sessions.sweepIdle(idleMs),
    },
    // Live sessions that commands were sent to lately are read again together, off the command path.
    { name: 'sessions.live-check', everyMs: liveSessions.checkEveryMs, run: () => liveSessions.check() },
    // Socket contact noted since the last run is written in a few statements.
    { name: 'sessions.contacts', everyMs: 1000, run: () => sessions.flushContacts() },
    // Streams whose device stayed away longer than the grace stop at the last contact.
    {
      name: 'streams.disconnect-sweep',
      everyMs: Math.min(5_000, Math.max(250, graceMs / 4)),
      run: () => streams.sweepDisconnected(graceMs, (ids) => presence.connected(ids)),
    },
    // Delivery times of commands written to sockets here and not yet answered.
    { name: 'commands.delivery-marks', everyMs: 250, run: () => delivery.flushMarks() },
    // Open commands past their time become `expired` (and the streams module rolls back).
    { name: 'commands.expiry', everyMs: config.commandSweepIntervalMs, run: () => commands.sweepExpired() },
    // Server pings find dead device sockets.
    { name: 'realtime.ping', everyMs: config.heartbeatIntervalMs, run: async () => hub.pingAll() },
    // Device sockets whose token expired (4401) or was revoked (4003; the bus closes those at once,
    // this catches what a lost bus message missed) close within a second; so do live tails of a
    // revoked client (a tail also ends when its token expires).
    {
      name: 'realtime.token-check',
      everyMs: 1000,
      run: async () => {
        const pass = auth.passRefusal(revocationsSeen);
        revocationsSeen = pass.version;
        hub.closeRefused(pass.refusal);
        tail.closeRefused((principal) => pass.refusal(principal) !== null);
      },
    },
    // Revocations and signing keys changed by other processes, read from the store in case the bus lost them.
    { name: 'auth.refresh', everyMs: AUTH_REFRESH_MS, run: () => auth.refresh() },
    // Finished webhook deliveries past retention are deleted.
    ...webhooks.jobs(),
    // Events received longer ago than their tenant's retention are deleted, in small batches.
    eventRetentionJob(retention, logger),
    // Screenshot uploads whose event never committed (a crash in between) lose their blob after an hour.
    screenshotOrphansJob(screenshots, logger),
    // Erased players' rows go in small batches; an erasure completes after a pass that finds nothing.
    players.job(),
  ];
}
