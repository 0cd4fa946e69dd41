import type { AspectRatio, Resolution } from '@liveline/protocol';

/** What the app may say about the headset when a session starts. */
export interface DeviceInfo {
  model?: string;
  os?: string;
  /** Filled with the SDK's own version when left out. */
  sdkVersion?: string;
  appVersion?: string;
}

export interface StartSessionOptions {
  /** Ignored by the server when the device token already names a cohort. */
  tenantCohortId?: string;
  device?: DeviceInfo;
}

/** The answer to `POST /client/v1/sessions`. */
export interface SessionInfo {
  sessionId: string;
  realtimeUrl: string;
  heartbeatIntervalMs: number;
}

/** The session object (CONTRACT §4), as returned when a session ends. */
export interface Session {
  sessionId: string;
  tenantCohortId: string | null;
  playerId: string;
  device: DeviceInfo;
  status: 'live' | 'ended';
  connected: boolean;
  startedAt: number;
  lastSeenAt: number;
  endedAt: number | null;
  /** `device` (ended through `/end`), `idle` (ended by the server), or the `reason` of a `SessionEnd` event. */
  endReason: string | null;
  stream: {
    state: 'idle' | 'starting' | 'streaming' | 'stopping';
    streamingSessionId: string | null;
    resolution: Resolution | null;
    aspectratio: AspectRatio | null;
    startedAt: number | null;
  };
  recording: {
    state: 'idle' | 'starting' | 'recording' | 'stopping';
    recordingId: string | null;
    startedAt: number | null;
  };
}

/** The answer to an event batch: how many events were new, how many the server already had. */
export interface EventBatchResult {
  accepted: number;
  duplicates: number;
}

/** Where the device's sessions live on the server. */
export const SESSIONS_PATH = '/client/v1/sessions';

/** The path of one session, under which its device routes sit (`/events`, `/end`, `/stream/start`, …). */
export function sessionPath(sessionId: string): string {
  return `${SESSIONS_PATH}/${encodeURIComponent(sessionId)}`;
}
