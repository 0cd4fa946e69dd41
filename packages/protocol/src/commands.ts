/** The commands of CONTRACT §2 and §3: their names, the variable types of custom ones, their limits. */

/** Commands the server sends for the stream and recording state machines. */
export const SERVER_COMMANDS = ['stream.start', 'stream.stop', 'record.start', 'record.stop'] as const;
export type ServerCommandName = (typeof SERVER_COMMANDS)[number];

/** Commands with a fixed meaning that a tenant sends through the generic endpoint. */
export const BUILT_IN_COMMANDS = ['camera', 'text', 'screenshot'] as const;
export type BuiltInCommandName = (typeof BUILT_IN_COMMANDS)[number];

/** Every name a tenant's custom command may not take (nor any of its variables). */
export const RESERVED_COMMAND_NAMES = [...BUILT_IN_COMMANDS, ...SERVER_COMMANDS] as const;

/** A custom command's name: 1–64 characters of `[A-Za-z0-9_.-]`. */
export const CUSTOM_COMMAND_NAME_PATTERN = '^[A-Za-z0-9_.-]{1,64}$';

/**
 * The options of a `screenshot` command (CONTRACT §14: the tenant asks for one now): `data` is `{}` or
 * names the format the tenant would like; the device's screenshot provider may ignore it. The SDK
 * answers by uploading the screenshot (`POST /client/v1/sessions/{id}/screenshots`), then acks.
 */
export const SCREENSHOT_FORMATS = ['jpeg', 'png'] as const;
export type ScreenshotFormat = (typeof SCREENSHOT_FORMATS)[number];
export interface ScreenshotCommandData {
  format?: ScreenshotFormat;
}

/** The types of a custom command's variables; every value travels as text. */
export const VARIABLE_TYPES = ['string', 'bool', 'int', 'float'] as const;
export type VariableType = (typeof VARIABLE_TYPES)[number];

/** Limits of a command's `data`. */
export const COMMAND_LIMITS = {
  /** Controls in one `camera` command. */
  cameraControls: 32,
  /** Characters of a `text` command. */
  textLength: 4096,
  /** Variables of one custom command. */
  variables: 256,
  /** Characters of a custom command's name and of each variable name. */
  nameLength: 64,
  /** Characters of a `string` variable's value. */
  stringValueLength: 4096,
} as const;
