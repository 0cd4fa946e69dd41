// The face of the screenshots module: everything outside it imports from here only.
export { type ScreenshotSessions, type ScreenshotsPluginOptions, screenshotsPlugin } from './routes.ts';
export {
  blobKey,
  ORPHAN_SWEEP_EVERY_MS,
  PENDING_UPLOAD_TTL_MS,
  type ScreenshotEvents,
  type ScreenshotSession,
  ScreenshotsService,
  type ScreenshotUpload,
  screenshotOrphansJob,
} from './service.ts';
