export { StreamStartBody, type StreamsPluginOptions, streamsPlugin } from './routes.ts';
export { type StreamInterval, type StreamParams, StreamsService } from './service.ts';
export { STREAM_COMMAND_NAMES } from './state-machine.ts';
