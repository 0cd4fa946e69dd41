export { type SessionsPluginOptions, sessionsPlugin } from './routes.ts';
export {
  eventSession,
  type RecordingView,
  type SessionDecorator,
  type SessionLiveState,
  type SessionRow,
  SessionsService,
  type StreamView,
} from './service.ts';
