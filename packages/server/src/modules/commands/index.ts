export { type BatchEntry, type BatchOptions, type CohortSessions, CommandBatches } from './batches.ts';
export { CommandDelivery, type CommandTransport } from './delivery.ts';
export { type CommandsPluginOptions, commandsPlugin } from './routes.ts';
export { type BatchesPluginOptions, batchesPlugin } from './routes-batches.ts';
export {
  type AckResult,
  type CommandStatus,
  CommandsService,
  type CommandView,
  type IssueHook,
} from './service.ts';
