export type { Bus, BusHandler, BusMessage, PresenceChange, WireCommand } from './bus.ts';
export { type BusDeployment, connectBus, redisErrorLogger } from './connect.ts';
export { MemoryBus } from './memory-bus.ts';
export { MemoryPresence } from './memory-presence.ts';
export type { Holder, Presence } from './presence.ts';
export type { RedisLink } from './redis-link.ts';
