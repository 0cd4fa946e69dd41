export { type DeviceHandlers, type DeviceLine, RealtimeHub } from './hub.ts';
export { CLOSE } from './protocol.ts';
export { type RealtimePluginOptions, realtimePlugin } from './routes.ts';
