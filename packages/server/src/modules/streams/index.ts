export { StreamStartBody, type StreamsPluginOptions, streamsPlugin } from './routes.ts';
export { type StreamInterval, type StreamParams, StreamsService } from './service.ts';
