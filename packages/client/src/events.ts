/**
 * The events an app may send (CONTRACT §5), typed from the schemas of `@liveline/protocol`.
 * Server-emitted types (`StreamStarted`, `StreamStopped`, `RecordingStarted`, `RecordingStopped`) are
 * deliberately absent: a client sending them gets a 400. The server validates; these types guide.
 */
import {
  CLIENT_EVENT_TYPES,
  type ClientEventFields,
  type ClientEventType,
  type EventCommon as WireEventCommon,
} from '@liveline/protocol';

export type { ClientEventFields, ClientEventType };

export const clientEventTypes = CLIENT_EVENT_TYPES;

/**
 * Fields every event has (`id`: 1–128 characters, unique within the session; `timestamp`: Unix ms;
 * `sessionId`: when present, the session the event is sent to). The SDK fills `id` and `timestamp`
 * when the app leaves them out.
 */
export type EventCommon = Partial<WireEventCommon>;

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
