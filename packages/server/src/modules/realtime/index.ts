export { type DeviceHandlers, type DeviceLine, type InboundLimits, RealtimeHub, type Spend } from './hub.ts';
export { CLOSE } from './protocol.ts';
export { type RealtimePluginOptions, realtimePlugin } from './routes.ts';
