import type { Services } from './compose.ts';

/** @deprecated Plugins take the services they use as options; the modules still on the bag are being moved. */
export type AppContext = Services;

/** @deprecated See AppContext. */
export interface ModuleOptions {
  ctx: AppContext;
}
