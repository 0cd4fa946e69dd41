export {
  AspectRatio,
  type CameraControlName,
  type CameraControlSpec,
  CameraControls,
  CameraView,
  cameraControlNames,
  isCameraControlName,
  LookType,
  Resolution,
} from '@liveline/protocol';
export { backoffDelay, type RetryOptions } from './backoff.ts';
export { type EventBufferStorage, indexedDbEventStorage, type StoredEvent } from './buffer-storage.ts';
export * from './challenges.ts';
export {
  type CameraHandler,
  type CameraSettings,
  type CommandCancellation,
  type CommandValue,
  type CustomCommandHandler,
  type HandlerResult,
  MalformedCommandError,
  type ParsedCommand,
  parseCommand,
  type RealtimeCommand,
  type RecordStartHandler,
  type RecordStartRequest,
  type ScreenshotHandler,
  type StopHandler,
  type StreamStartHandler,
  type StreamStartRequest,
  type TextHandler,
} from './commands.ts';
export {
  type DeviceErrorEvent,
  type DeviceEvents,
  type DeviceStats,
  type DroppedEvents,
  type HealthFields,
  LivelineDevice,
  type LivelineDeviceOptions,
  type StreamOptions,
} from './device.ts';
export { Emitter } from './emitter.ts';
export {
  type ClientEvent,
  type ClientEventFields,
  type ClientEventType,
  clientEventTypes,
  type EventCommon,
  type StampedEvent,
} from './events.ts';
export { type HealthHook, HealthSampler } from './health.ts';
export {
  type Clock,
  type FieldError,
  HttpClient,
  type HttpClientOptions,
  isRetryableStatus,
  LivelineError,
  parseRetryAfter,
  systemClock,
} from './http.ts';
export { CloseCode, type DisconnectedInfo, type ReconnectingInfo, type WelcomeInfo } from './realtime.ts';
export type { EventRejection } from './refusals.ts';
export {
  type CanvasLike,
  type Screenshot,
  type ScreenshotProvider,
  type ScreenshotRequest,
  type ScreenshotType,
  type StoredScreenshot,
  screenshotFromBuffer,
  screenshotFromCanvas,
  type TakeScreenshotOptions,
} from './screenshots.ts';
export type { DeviceInfo, EventBatchResult, Session, SessionInfo, StartSessionOptions } from './session.ts';
export {
  nodeWebSocketConnector,
  type RealtimeSocket,
  type SocketClose,
  type SocketConnector,
  type SocketHandlers,
  standardWebSocketConnector,
} from './socket.ts';
export { SDK_VERSION } from './version.ts';
