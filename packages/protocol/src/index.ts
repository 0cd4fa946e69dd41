export type { Static, TSchema } from 'typebox';
export * from './commands.ts';
export * from './enums.ts';
export * from './events.ts';
export * from './frames.ts';
export * from './messages.ts';
export * from './redemption.ts';
export { StringEnum } from './string-enum.ts';
