import {
  AspectRatio,
  type CameraSettings,
  CameraView,
  type CommandValue,
  type HealthFields,
  LivelineDevice,
  LookType,
  type RealtimeCommand,
  Resolution,
} from '@liveline/client';
import { ASPECT_RATIO_LABELS, RESOLUTION_LABELS } from '@liveline/protocol';
import { type Command, InvalidArgumentError } from 'commander';
import { serverUrl } from './admin-client.ts';
import { CliError } from './errors.ts';

type Env = Record<string, string | undefined>;

interface SimOptions {
  devices: number;
  url?: string;
  accessToken?: string;
  clientId?: string;
  clientSecret?: string;
  cohort?: string;
  healthInterval: number;
  batteryDrain?: number;
  batteryStart?: number;
  streamFor?: number;
  claim?: boolean;
}

/** One simulated headset: its device, session and label for printing. */
interface Headset {
  label: string;
  sessionId: string;
  device: LivelineDevice;
}

const REQUEST_TIMEOUT_MS = 30_000;
/** How long Ctrl-C waits for the sessions to end before leaving anyway. */
const END_TIMEOUT_MS = 10_000;

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1000) {
    throw new InvalidArgumentError('It must be an integer from 1 to 1000.');
  }
  return n;
}

function positiveSeconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) {
    throw new InvalidArgumentError('It must be a positive number of seconds.');
  }
  return n;
}

function percent(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 100) {
    throw new InvalidArgumentError('It must be a number from 0 to 100.');
  }
  return n;
}

function drainRate(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n > 6000) {
    throw new InvalidArgumentError('It must be a positive number of percent per minute, at most 6000.');
  }
  return n;
}

/** `liveline sim`: simulated headsets that print the commands they get, for trying commands by hand. */
export function registerSim(program: Command) {
  program
    .command('sim')
    .description(
      'simulate VR headsets for a tenant: each starts a session, prints and acknowledges every command it ' +
        'receives, and sends Health events; Ctrl-C ends the sessions',
    )
    .option('--devices <n>', 'how many headsets', positiveInt, 3)
    .option('--url <url>', 'server URL (default: $LIVELINE_URL, else http://127.0.0.1:$PORT, port 8080)')
    .option(
      '--access-token <token>',
      'a tenant access token with scope tokens:issue (default: $LIVELINE_ACCESS_TOKEN)',
    )
    .option(
      '--client-id <id>',
      'tenant client id, used when no access token is given (default: $LIVELINE_CLIENT_ID)',
    )
    .option('--client-secret <secret>', 'its secret (default: $LIVELINE_CLIENT_SECRET)')
    .option('--cohort <tenantCohortId>', 'the cohort the sessions belong to')
    .option('--health-interval <seconds>', 'seconds between Health events', positiveSeconds, 5)
    .option(
      '--battery-drain <percent per minute>',
      'the battery drains at this rate from --battery-start (600: 10 % a second), down to 0',
      drainRate,
    )
    .option(
      '--battery-start <percent>',
      'the battery level of the first Health event (default 100 with --battery-drain, else 70-100)',
      percent,
    )
    .option(
      '--stream-for <seconds>',
      'each headset streams (1080p, 16:9) for this long once it has started',
      positiveSeconds,
    )
    .option('--claim', 'then claim every completed challenge and print how to redeem it')
    .action(async (opts: SimOptions) => runSim(opts, process.env));
}

async function runSim(opts: SimOptions, env: Env): Promise<void> {
  const url = serverUrl(opts.url, env);
  const tenantToken = await accessToken(url, opts, env);
  const started = await Promise.allSettled(
    Array.from({ length: opts.devices }, (_, i) => startHeadset(url, tenantToken, i + 1, opts)),
  );
  const headsets = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failure = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) {
    await endAll(headsets, false);
    throw failure.reason;
  }

  const plural = headsets.length === 1 ? 'headset' : 'headsets';
  out(`liveline sim: ${headsets.length} ${plural} on ${url} (Ctrl-C ends their sessions)`);
  for (const h of headsets) out(`${h.label}  session ${h.sessionId}`);
  out('Send one a command, with a tenant access token (scope commands:send) in $TOKEN:');
  out(
    `  curl -X POST ${url}/sessions/${headsets[0].sessionId}/realtime/commands ` +
      `-H "authorization: Bearer $TOKEN" -H 'content-type: application/json' ` +
      `-d '{"name":"text","data":"hello headset"}'`,
  );

  if (opts.streamFor !== undefined) await Promise.all(headsets.map((h) => streamFor(h, opts.streamFor!)));
  if (opts.claim) await Promise.all(headsets.map((h) => claimCompleted(h)));

  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      // A second Ctrl-C while the sessions end leaves at once.
      process.once('SIGINT', () => process.exit(130));
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  out('Ending the sessions…');
  // Ending a session first sends what its device still holds, retrying as long as it has to: with the
  // server gone that is forever, and a sim left running in the background by a script would never exit.
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), END_TIMEOUT_MS);
  });
  const ended = await Promise.race([endAll(headsets, true).then(() => 'ended' as const), late]);
  clearTimeout(timer);
  if (ended === 'late') {
    await Promise.all(headsets.map((h) => h.device.close()));
    throw new CliError(
      'sessions_not_ended',
      `the sessions did not end within ${END_TIMEOUT_MS / 1000} s (is the server reachable at ${url}?).`,
    );
  }
  out('Done.');
}

/** `--access-token`, else one from the client credentials at `/oauth/token`. */
async function accessToken(url: string, opts: SimOptions, env: Env): Promise<string> {
  const given = opts.accessToken ?? env.LIVELINE_ACCESS_TOKEN?.trim();
  if (given) return given;
  const clientId = opts.clientId ?? env.LIVELINE_CLIENT_ID?.trim();
  const clientSecret = opts.clientSecret ?? env.LIVELINE_CLIENT_SECRET?.trim();
  if (!clientId || !clientSecret) {
    throw new CliError(
      'no_credentials',
      'The simulator needs a tenant: pass --access-token, or --client-id and --client-secret ' +
        '(or set LIVELINE_ACCESS_TOKEN, or LIVELINE_CLIENT_ID and LIVELINE_CLIENT_SECRET).',
    );
  }
  const body = await request<{ access_token?: string }>(url, '/oauth/token', {
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
    },
    body: new URLSearchParams({ grant_type: 'client_credentials' }).toString(),
  });
  if (!body.access_token) throw new CliError('invalid_response', 'The token answer has no access_token.');
  return body.access_token;
}

/** A POST to the server; failures become CliErrors with the server's code (or OAuth `error`). */
async function request<T>(
  url: string,
  path: string,
  init: { headers: Record<string, string>; body: string },
): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url + path, {
      method: 'POST',
      ...init,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    const cause = err instanceof Error ? (err.cause as NodeJS.ErrnoException | undefined) : undefined;
    const reason = cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
    throw new CliError('connection_failed', `Could not reach ${url}: ${reason}.`);
  }
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    parsed = {};
  }
  if (!res.ok) {
    const code =
      typeof parsed.code === 'string'
        ? parsed.code
        : typeof parsed.error === 'string'
          ? parsed.error
          : `http_${res.status}`;
    const detail =
      typeof parsed.detail === 'string'
        ? parsed.detail
        : typeof parsed.error_description === 'string'
          ? parsed.error_description
          : `HTTP ${res.status} from ${path}`;
    throw new CliError(code, detail);
  }
  return parsed as T;
}

async function startHeadset(url: string, tenantToken: string, n: number, opts: SimOptions): Promise<Headset> {
  const label = `sim-${n}`;
  const minted = await request<{ token: string }>(url, '/client-tokens', {
    headers: { authorization: `Bearer ${tenantToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(
      opts.cohort ? { playerId: label, tenantCohortId: opts.cohort } : { playerId: label },
    ),
  });
  const device = new LivelineDevice({ baseUrl: url, token: minted.token });
  let sessionId: string;
  try {
    const info = await device.startSession({
      ...(opts.cohort ? { tenantCohortId: opts.cohort } : {}),
      device: { model: 'liveline sim', os: 'sim' },
    });
    sessionId = info.sessionId;
  } catch (err) {
    await device.close();
    throw err;
  }
  const headset = { label, sessionId, device };
  wire(headset);
  try {
    await device.connect();
  } catch (err) {
    await endAll([headset], false);
    throw err;
  }
  // Only reconnects are news: the first connection is implied by the list printed at start.
  device.on('connected', () => out(`${sessionId} ${label}  reconnected`));
  device.startHealthReporting(batteryOf(headset, opts), opts.healthInterval * 1000);
  return headset;
}

/**
 * The Health provider: with `--battery-drain`, the level falls linearly with time from
 * `--battery-start` (default 100) to 0, and a line is printed each time it passes a multiple of 10;
 * without it, the level starts at `--battery-start` (else 70-100) and drifts down slowly.
 */
function batteryOf({ label, sessionId }: Headset, opts: SimOptions): () => HealthFields {
  const { batteryDrain } = opts;
  if (batteryDrain === undefined) {
    let battery = opts.batteryStart ?? 100 - Math.floor(Math.random() * 30);
    return () => {
      battery = Math.max(Math.min(1, battery), battery - Math.random() * 0.5);
      return health(battery);
    };
  }
  const start = opts.batteryStart ?? 100;
  const startedAt = Date.now();
  let printed = Math.ceil(start / 10);
  return () => {
    const level = Math.max(0, start - (batteryDrain * (Date.now() - startedAt)) / 60_000);
    const fields = health(level);
    const decile = Math.ceil((fields.batteryLevel ?? 0) / 10);
    if (decile < printed) {
      printed = decile;
      out(`${sessionId} ${label}  battery ${fields.batteryLevel}%`);
    }
    return fields;
  };
}

/** An app-initiated stream of the given length (spec rule 3: streams may start inside the app). */
async function streamFor({ label, sessionId, device }: Headset, seconds: number): Promise<void> {
  const { streamingSessionId } = await device.startStream({
    resolution: Resolution.P1080,
    aspectratio: AspectRatio.R16x9,
  });
  out(`${sessionId} ${label}  streaming ${streamingSessionId} for ${seconds} s`);
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  await device.stopStream();
  out(`${sessionId} ${label}  stream stopped`);
}

/** Claims what the player has completed, as a viewer app's claim button would, and says how to redeem it. */
async function claimCompleted({ label, sessionId, device }: Headset): Promise<void> {
  const say = (text: string) => out(`${sessionId} ${label}  ${text}`);
  for (const challenge of await device.challenges()) {
    const { rewardCode, progress } = challenge;
    if (challenge.status === 'inProgress') {
      say(
        `challenge ${rewardCode}: ${progress.value}/${progress.target} (${challenge.rule.type}), not complete`,
      );
      continue;
    }
    const { redemption } = await device.claim(challenge.challengeId);
    if (redemption.method === 'displayCode') {
      say(
        `claimed ${rewardCode}: display code ${redemption.code} — ${JSON.stringify(redemption.instructions)}`,
      );
    } else if (redemption.method === 'intent') {
      const component = [redemption.packageName, redemption.activityName].filter(Boolean).join('/');
      say(`claimed ${rewardCode}: intent ${redemption.form} ${component} data ${redemption.dataUrl}`);
    } else {
      say(`claimed ${rewardCode}: open ${redemption.url}`);
    }
  }
}

/** Handlers that print each command and succeed, and lines for the channel's ups and downs. */
function wire({ label, sessionId, device }: Headset): void {
  const say = (text: string) => out(`${sessionId} ${label}  ${text}`);
  const tag = (cmd: RealtimeCommand) => `  [${cmd.commandId}]`;
  device.onText((text, cmd) => say(`text ${JSON.stringify(text)}${tag(cmd)}`));
  device.onCommand((name, variables, cmd) => say(`${name} ${formatVariables(variables)}${tag(cmd)}`));
  device.onCamera((controls, cmd) => say(`camera ${formatCamera(controls)}${tag(cmd)}`));
  device.onStreamStart((req, cmd) =>
    say(
      `stream.start ${RESOLUTION_LABELS[req.resolution]} ${ASPECT_RATIO_LABELS[req.aspectratio]} ` +
        `stream ${req.streamingSessionId}${tag(cmd)}`,
    ),
  );
  device.onStreamStop((cmd) => say(`stream.stop${tag(cmd)}`));
  device.onRecordStart((req, cmd) => say(`record.start recording ${req.recordingId}${tag(cmd)}`));
  device.onRecordStop((cmd) => say(`record.stop${tag(cmd)}`));
  device.on('disconnected', ({ code, willReconnect }) => {
    // 1000 without a reconnect is the simulator's own goodbye.
    if (code !== 1000 || willReconnect) say(`disconnected (${code})${willReconnect ? ', reconnecting' : ''}`);
  });
  device.on('replaced', () => say('replaced by another connection to this session; this one stops'));
  device.on('error', ({ error, rejectedEvents }) =>
    say(
      `error ${error.code}: ${error.detail}${rejectedEvents.length ? ` (${rejectedEvents.length} events dropped)` : ''}`,
    ),
  );
}

async function endAll(headsets: Headset[], print: boolean): Promise<void> {
  await Promise.all(
    headsets.map(async ({ label, sessionId, device }) => {
      try {
        await device.endSession();
        if (print) out(`${sessionId} ${label}  session ended`);
      } catch (err) {
        const detail = err instanceof Error ? err.message : String(err);
        process.stderr.write(`${sessionId} ${label}  could not end the session: ${detail}\n`);
      } finally {
        await device.close();
      }
    }),
  );
}

/** Plausible numbers for a standalone headset. */
function health(battery: number): HealthFields {
  const around = (center: number, spread: number) => center + (Math.random() * 2 - 1) * spread;
  return {
    fps: Math.round(around(80, 10)),
    cpuUsage: Math.round(around(45, 20) * 10) / 10,
    batteryLevel: Math.round(battery * 10) / 10,
    memoryUsage: Math.round(around(2300, 300)),
    errorCount: Math.random() < 0.05 ? 1 : 0,
  };
}

const enumName = (values: Record<string, number>, value: number) =>
  Object.entries(values).find(([, v]) => v === value)?.[0] ?? String(value);

function formatCamera(controls: CameraSettings): string {
  return Object.entries(controls)
    .map(([name, value]) => {
      if (name === 'cameraView') return `${name}=${enumName(CameraView, value)}`;
      if (name === 'lookType') return `${name}=${enumName(LookType, value)}`;
      return `${name}=${value}`;
    })
    .join(' ');
}

function formatVariables(variables: Record<string, CommandValue>): string {
  return Object.entries(variables)
    .map(([name, value]) => `${name}=${typeof value === 'string' ? JSON.stringify(value) : value}`)
    .join(' ');
}
