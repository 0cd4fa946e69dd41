export { CommandDelivery, type CommandTransport } from './delivery.ts';
export { type CommandsPluginOptions, commandsPlugin } from './routes.ts';
export {
  type AckResult,
  type CommandStatus,
  CommandsService,
  type CommandView,
  type IssueHook,
} from './service.ts';
