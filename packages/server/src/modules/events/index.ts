export { CLIENT_EVENT_TYPES, SERVER_EVENT_TYPES } from './event-types.ts';
