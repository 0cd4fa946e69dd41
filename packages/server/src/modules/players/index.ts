// The face of the players module: everything outside it imports from here only.
export { type PlayersPluginOptions, playersPlugin } from './routes.ts';
export {
  ERASURE_BATCH,
  type ErasedListener,
  type Eraser,
  type ErasureScope,
  type PlayersDeps,
  type PlayersOptions,
  PlayersService,
} from './service.ts';
