export { decodeTailCursor, encodeTailCursor, type TailCursor } from './cursor.ts';
export { type PresenceNote, TailHub, type TailMetrics, type TailOptions, type TailSink } from './hub.ts';
export { type TailPluginOptions, tailPlugin } from './routes.ts';
export { type TailRow, type TailScope, TailStore } from './store.ts';
