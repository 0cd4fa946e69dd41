export { LiveSessions } from './live-sessions.ts';
export { type SessionsPluginOptions, sessionsPlugin } from './routes.ts';
export { CohortId, SessionSchema } from './schemas.ts';
export {
  type EndingHook,
  type EndOptions,
  eventSession,
  type RecordingView,
  type RemovingHook,
  type SessionDecorator,
  type SessionLiveState,
  type SessionRow,
  SessionsService,
  type StreamView,
} from './service.ts';
export type { StartCursor, StartRange } from './store.ts';
