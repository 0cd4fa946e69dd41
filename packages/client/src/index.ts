export { backoffDelay, type RetryOptions } from './backoff.ts';
export {
  type DeviceErrorEvent,
  type DeviceEvents,
  type DeviceStats,
  LivelineDevice,
  type LivelineDeviceOptions,
} from './device.ts';
export { Emitter } from './emitter.ts';
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
} from './enums.ts';
export {
  type ClientEvent,
  type ClientEventFields,
  type ClientEventType,
  clientEventTypes,
  type EventCommon,
  type StampedEvent,
} from './events.ts';
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
export type { EventRejection } from './refusals.ts';
export type { DeviceInfo, EventBatchResult, Session, SessionInfo, StartSessionOptions } from './session.ts';
export { SDK_VERSION } from './version.ts';
