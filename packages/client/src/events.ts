/**
 * The events an app may send (CONTRACT §5). Server-emitted types (`StreamStarted`, `StreamStopped`,
 * `RecordingStarted`, `RecordingStopped`) are deliberately absent: a client sending them gets a 400.
 * Strings are at most 1024 characters unless noted; the server validates, these types only guide.
 */

/** The fields each client event type carries, beyond the common ones. */
export interface ClientEventFields {
  Custom: {
    custom01?: string;
    custom02?: string;
    custom03?: string;
    custom04?: string;
    custom05?: string;
    custom06?: string;
    custom07?: string;
    custom08?: string;
    custom09?: string;
    custom10?: string;
  };
  Health: {
    fps?: number;
    /** Percent, 0–100. */
    cpuUsage?: number;
    /** Percent, 0–100. */
    batteryLevel?: number;
    /** Megabytes. */
    memoryUsage?: number;
    /** Integer ≥ 0. */
    errorCount?: number;
  };
  Progression: {
    progressionStatus: 'Start' | 'Fail' | 'Complete';
    progression01: string;
    progression02?: string;
    progression03?: string;
    /** Integer. */
    score?: number;
  };
  Business: {
    /** Integer, in minor units of `currency` (cents for USD). */
    amount: number;
    /** ISO 4217 code, e.g. `USD`. */
    currency: string;
    itemType: string;
    itemId: string;
    cartType?: string;
  };
  Resource: {
    flowType: 'Sink' | 'Source';
    currency: string;
    /** Greater than 0. */
    amount: number;
    itemType: string;
    itemId: string;
  };
  Design: {
    /** 1–4 category levels joined by `:`, each `[A-Za-z0-9_ -]{1,64}`, e.g. `level:boss:defeated`. */
    eventId: string;
    value?: number;
  };
  Error: {
    severity: 'Critical' | 'Error' | 'Warning' | 'Information' | 'Debug';
    /** At most 8192 characters. */
    message: string;
  };
  Impression: {
    adNetwork: string;
    adType?: string;
    adPlacement?: string;
    adId?: string;
  };
  Screenshot: {
    imageUrl?: string;
    imageId?: string;
    width?: number;
    height?: number;
    streamingSessionId?: string;
  };
  SessionEnd: {
    /** Seconds, ≥ 0. */
    duration?: number;
    reason?: string;
  };
}

export type ClientEventType = keyof ClientEventFields;

export const clientEventTypes = [
  'Custom',
  'Health',
  'Progression',
  'Business',
  'Resource',
  'Design',
  'Error',
  'Impression',
  'Screenshot',
  'SessionEnd',
] as const satisfies readonly ClientEventType[];

/** Fields every event has. The SDK fills `id` and `timestamp` when the app leaves them out. */
export interface EventCommon {
  /** 1–128 characters, unique within the session; resends with the same id are deduplicated. */
  id?: string;
  /** Unix milliseconds. */
  timestamp?: number;
  /** Optional; when present it must equal the session the event is sent to. */
  sessionId?: string;
}

/**
 * What an app passes to `track()`: a union discriminated by `eventType`.
 * `ClientEvent<'Health'>` narrows to one type.
 */
export type ClientEvent<T extends ClientEventType = ClientEventType> = {
  [K in T]: { eventType: K } & EventCommon & ClientEventFields[K];
}[T];

/** An event as it is buffered and sent: `id` and `timestamp` are always set. */
export type StampedEvent<T extends ClientEventType = ClientEventType> = ClientEvent<T> & {
  id: string;
  timestamp: number;
};
