import {
  type AspectRatio,
  type CameraControlName,
  CameraControls,
  type CameraView,
  type CommandMessage,
  isCameraControlName,
  type LookType,
  type Resolution,
  type AckMessage as WireAckMessage,
} from '@liveline/protocol';
import { type ScreenshotRequest, screenshotRequest } from './screenshots.ts';

/**
 * A `command` message as it came off the socket (CONTRACT §2): `name` is `stream.start`, `stream.stop`,
 * `record.start`, `record.stop`, `camera`, `text` or a custom name; `data` is exactly what the server
 * sent; `issuedAt` is Unix ms, when the server accepted the command.
 */
export type RealtimeCommand = Omit<CommandMessage, 'type'> & {
  /**
   * Given to handlers: aborted when the tenant cancels the command while its handler runs (a long
   * `stream.start` can stop its setup). The SDK then sends no answer, whatever the handler does.
   */
  signal?: AbortSignal;
};

/**
 * A cancelled command (`command.cancel`), and how far the app had got with it: `waiting` (its handler
 * will not run), `running` (its `signal` is aborted; no answer will be sent), `answered` (the handler
 * had finished: undo its effect if that matters), or `unknown` (this SDK never saw it, or forgot it).
 */
export interface CommandCancellation {
  commandId: string;
  stage: 'waiting' | 'running' | 'answered' | 'unknown';
  /** The command, while it was waiting or running; null otherwise. */
  command: RealtimeCommand | null;
}

/** A typed value of a custom command's variable: `bool` → boolean, `int`/`float` → number, `string` → string. */
export type CommandValue = string | boolean | number;

/** The controls of a `camera` command, typed. Only the controls the command carried are present. */
export interface CameraSettings {
  /** Degrees, 1–179. */
  fieldOfView?: number;
  /** 0–10. */
  smoothingAmount?: number;
  cameraView?: CameraView;
  lookType?: LookType;
  /** 0–100. */
  followDistance?: number;
  /** −100–100. */
  heightOffset?: number;
}

/** What a `stream.start` command asks for; the server already allocated the stream's id. */
export interface StreamStartRequest {
  resolution: Resolution;
  aspectratio: AspectRatio;
  streamingSessionId: string;
}

/** What a `record.start` command asks for; the server already allocated the recording's id. */
export interface RecordStartRequest {
  recordingId: string;
}

/**
 * What a handler returns. The SDK acknowledges the command once the returned promise resolves
 * (`ok: true`), and refuses it (`ok: false` with the error's message) when the handler throws or rejects.
 */
export type HandlerResult = void | Promise<void>;

export type TextHandler = (text: string, command: RealtimeCommand) => HandlerResult;
export type CustomCommandHandler = (
  name: string,
  variables: Record<string, CommandValue>,
  command: RealtimeCommand,
) => HandlerResult;
export type CameraHandler = (controls: CameraSettings, command: RealtimeCommand) => HandlerResult;
export type StreamStartHandler = (request: StreamStartRequest, command: RealtimeCommand) => HandlerResult;
export type RecordStartHandler = (request: RecordStartRequest, command: RealtimeCommand) => HandlerResult;
export type StopHandler = (command: RealtimeCommand) => HandlerResult;
/** Takes a screenshot and uploads it (the device registers its own, from its `screenshotProvider`). */
export type ScreenshotHandler = (request: ScreenshotRequest, command: RealtimeCommand) => HandlerResult;

/** The device's answer to a command, as it goes on the wire. */
export type AckMessage = WireAckMessage &
  (
    | { type: 'ack'; commandId: string; ok: true }
    | { type: 'ack'; commandId: string; ok: false; error: string }
  );

/** The kinds of command an app handles, each with its own registration method. */
export type CommandKind =
  | 'text'
  | 'custom'
  | 'camera'
  | 'streamStart'
  | 'streamStop'
  | 'recordStart'
  | 'recordStop'
  | 'screenshot';

const REGISTRATION: Record<CommandKind, string> = {
  text: 'onText',
  custom: 'onCommand',
  camera: 'onCamera',
  streamStart: 'onStreamStart',
  streamStop: 'onStreamStop',
  recordStart: 'onRecordStart',
  recordStop: 'onRecordStop',
  screenshot: 'the screenshotProvider option',
};

/** A command's payload, parsed and typed, ready for its handler. */
export type ParsedCommand =
  | { kind: 'text'; text: string }
  | { kind: 'custom'; name: string; variables: Record<string, CommandValue> }
  | { kind: 'camera'; controls: CameraSettings }
  | { kind: 'streamStart'; request: StreamStartRequest }
  | { kind: 'streamStop' }
  | { kind: 'recordStart'; request: RecordStartRequest }
  | { kind: 'recordStop' }
  | { kind: 'screenshot'; request: ScreenshotRequest };

/** Thrown by `parseCommand` for a payload that does not match its command's shape. */
export class MalformedCommandError extends Error {
  constructor(name: string, problem: string) {
    super(`Malformed "${name}" command: ${problem}.`);
    this.name = 'MalformedCommandError';
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const isEnumValue = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 4;

/** Reads a command's `data` into typed values (CONTRACT §2, §3); throws `MalformedCommandError`. */
export function parseCommand(command: RealtimeCommand): ParsedCommand {
  const { name, data } = command;
  const malformed = (problem: string) => new MalformedCommandError(name, problem);
  switch (name) {
    case 'text':
      if (typeof data !== 'string') throw malformed('`data` must be a string');
      return { kind: 'text', text: data };
    case 'camera':
      return { kind: 'camera', controls: parseCamera(data, malformed) };
    case 'stream.start': {
      if (!isObject(data)) throw malformed('`data` must be an object');
      const { resolution, aspectratio, streamingSessionId } = data;
      if (!isEnumValue(resolution)) throw malformed('`resolution` must be an integer from 0 to 4');
      if (!isEnumValue(aspectratio)) throw malformed('`aspectratio` must be an integer from 0 to 4');
      if (typeof streamingSessionId !== 'string') throw malformed('`streamingSessionId` must be a string');
      return {
        kind: 'streamStart',
        request: {
          resolution: resolution as Resolution,
          aspectratio: aspectratio as AspectRatio,
          streamingSessionId,
        },
      };
    }
    case 'stream.stop':
      return { kind: 'streamStop' };
    case 'record.start': {
      if (!isObject(data) || typeof data.recordingId !== 'string') {
        throw malformed('`data.recordingId` must be a string');
      }
      return { kind: 'recordStart', request: { recordingId: data.recordingId } };
    }
    case 'record.stop':
      return { kind: 'recordStop' };
    case 'screenshot':
      return { kind: 'screenshot', request: screenshotRequest(command.data) };
    default:
      return { kind: 'custom', name, variables: parseVariables(data, malformed) };
  }
}

function parseCamera(data: unknown, malformed: (problem: string) => Error): CameraSettings {
  if (!isObject(data) || !Array.isArray(data.controls)) throw malformed('`data.controls` must be an array');
  const settings: Partial<Record<CameraControlName, number>> = {};
  for (const [index, control] of data.controls.entries()) {
    if (!isObject(control) || typeof control.name !== 'string' || typeof control.value !== 'string') {
      throw malformed(`controls[${index}] must be {name, value} with string fields`);
    }
    // A control this SDK does not know yet (a newer server) is skipped rather than failing the command.
    if (!isCameraControlName(control.name)) continue;
    const spec = CameraControls[control.name];
    const value = Number(control.value);
    if (control.value.trim() === '' || !Number.isFinite(value)) {
      throw malformed(`${control.name} must be a number, got "${control.value}"`);
    }
    if (spec.kind === 'int' && !Number.isInteger(value)) {
      throw malformed(`${control.name} must be an integer, got "${control.value}"`);
    }
    if (value < spec.min || value > spec.max) {
      throw malformed(`${control.name} must be between ${spec.min} and ${spec.max}, got ${value}`);
    }
    settings[control.name] = value;
  }
  // Range-checked above: cameraView and lookType hold values of their enumerations.
  return settings as CameraSettings;
}

function parseVariables(data: unknown, malformed: (problem: string) => Error): Record<string, CommandValue> {
  if (!isObject(data)) throw malformed('`data` must be an object {names, types, values}');
  const { names, types, values } = data;
  if (!Array.isArray(names) || !Array.isArray(types) || !Array.isArray(values)) {
    throw malformed('`names`, `types` and `values` must be arrays');
  }
  if (types.length !== names.length || values.length !== names.length) {
    throw malformed('`names`, `types` and `values` must have equal lengths');
  }
  const entries: [string, CommandValue][] = names.map((name, index) => {
    const type = types[index];
    const value = values[index];
    if (typeof name !== 'string' || typeof value !== 'string') {
      throw malformed(`names[${index}] and values[${index}] must be strings`);
    }
    return [name, typedValue(name, type, value, malformed)];
  });
  // fromEntries defines own properties, so even a variable named `__proto__` is kept as data.
  return Object.fromEntries(entries);
}

function typedValue(
  name: string,
  type: unknown,
  value: string,
  malformed: (problem: string) => Error,
): CommandValue {
  switch (type) {
    case 'string':
      return value;
    case 'bool':
      if (value === 'true') return true;
      if (value === 'false') return false;
      throw malformed(`${name} must be true or false, got "${value}"`);
    case 'int':
    case 'float': {
      const number = Number(value);
      if (value.trim() === '' || !Number.isFinite(number) || (type === 'int' && !Number.isInteger(number))) {
        throw malformed(`${name} must be ${type === 'int' ? 'an integer' : 'a number'}, got "${value}"`);
      }
      return number;
    }
    default:
      throw malformed(`${name} has unknown type ${JSON.stringify(type)}`);
  }
}

interface Handlers {
  text?: TextHandler;
  custom?: CustomCommandHandler;
  camera?: CameraHandler;
  streamStart?: StreamStartHandler;
  streamStop?: StopHandler;
  recordStart?: RecordStartHandler;
  recordStop?: StopHandler;
  screenshot?: ScreenshotHandler;
}

/** How many recent command ids the SDK remembers to drop repeats (and answer them again). */
export const REMEMBERED_COMMANDS = 1000;

/**
 * Routes commands to the app's handlers and answers each one. Commands run one at a time, in the
 * order they arrived (the server sends them in the order it accepted them), so a `record.start`
 * handler never overlaps the `stream.start` before it.
 *
 * Delivery is at-least-once: the server sends a command again on a new connection until it has the
 * answer. A repeated `commandId` never reaches a handler twice; once its handler finished, the same
 * answer is sent again (the first may have been lost with the old connection).
 */
export class CommandRouter {
  private readonly handlers: Handlers = {};
  /** Recent commands, oldest first: the answer once known, `null` while the handler runs. */
  private readonly recent = new Map<string, AckMessage | null>();
  /** Commands received and not yet answered: whether their handler started, and their cancel switch. */
  private readonly unanswered = new Map<
    string,
    { command: RealtimeCommand; controller: AbortController; started: boolean }
  >();
  private queue: Promise<void> = Promise.resolve();

  /**
   * @param sendAck writes an answer to the socket if one is open; an answer lost with a connection
   *   is sent again when the server repeats the command.
   * @param onCommand sees each new command before its handler (logging); it must not throw.
   */
  constructor(
    private readonly sendAck: (ack: AckMessage) => void,
    private readonly onCommand: (command: RealtimeCommand) => void = () => {},
    private readonly capacity = REMEMBERED_COMMANDS,
  ) {}

  /** Registers the handler of one kind of command, replacing any earlier one; returns its remover. */
  set<K extends keyof Handlers>(kind: K, handler: NonNullable<Handlers[K]>): () => void {
    this.handlers[kind] = handler;
    return () => {
      if (this.handlers[kind] === handler) delete this.handlers[kind];
    };
  }

  /** Takes a command off the wire: drops or re-answers a repeat, else queues it for its handler. */
  receive(command: RealtimeCommand): void {
    if (this.recent.has(command.commandId)) {
      const answer = this.recent.get(command.commandId);
      if (answer) this.sendAck(answer);
      return;
    }
    this.recent.set(command.commandId, null);
    while (this.recent.size > this.capacity) {
      const oldest = this.recent.keys().next().value;
      if (oldest === undefined) break;
      this.recent.delete(oldest);
    }
    this.unanswered.set(command.commandId, { command, controller: new AbortController(), started: false });
    this.onCommand(command);
    this.queue = this.queue.then(() => this.run(command));
  }

  /**
   * The tenant cancelled a command: one still waiting never runs, a running one's `signal` is
   * aborted; neither is answered (the server has settled it as `cancelled`).
   */
  cancel(commandId: string): CommandCancellation {
    const open = this.unanswered.get(commandId);
    if (open) {
      open.controller.abort(new Error('The command was cancelled.'));
      return { commandId, stage: open.started ? 'running' : 'waiting', command: open.command };
    }
    return { commandId, stage: this.recent.get(commandId) ? 'answered' : 'unknown', command: null };
  }

  /** Resolves once every command received so far has been handled and answered. */
  idle(): Promise<void> {
    return this.queue;
  }

  private async run(command: RealtimeCommand): Promise<void> {
    const open = this.unanswered.get(command.commandId);
    const signal = open?.controller.signal;
    if (open) open.started = true;
    let ack: AckMessage;
    try {
      // Cancelled while it waited: its handler never runs.
      if (!signal?.aborted) await this.dispatch(signal ? { ...command, signal } : command);
      ack = { type: 'ack', commandId: command.commandId, ok: true };
    } catch (error) {
      ack = { type: 'ack', commandId: command.commandId, ok: false, error: messageOf(error) };
    }
    this.unanswered.delete(command.commandId);
    // A cancelled command is settled on the server: it gets no answer (a repeat is dropped).
    if (signal?.aborted) return;
    if (this.recent.has(command.commandId)) this.recent.set(command.commandId, ack);
    this.sendAck(ack);
  }

  private async dispatch(command: RealtimeCommand): Promise<void> {
    const parsed = parseCommand(command);
    const h = this.handlers;
    switch (parsed.kind) {
      case 'text':
        return h.text ? h.text(parsed.text, command) : unhandled(command, 'text');
      case 'custom':
        return h.custom ? h.custom(parsed.name, parsed.variables, command) : unhandled(command, 'custom');
      case 'camera':
        return h.camera ? h.camera(parsed.controls, command) : unhandled(command, 'camera');
      case 'streamStart':
        return h.streamStart ? h.streamStart(parsed.request, command) : unhandled(command, 'streamStart');
      case 'streamStop':
        return h.streamStop ? h.streamStop(command) : unhandled(command, 'streamStop');
      case 'recordStart':
        return h.recordStart ? h.recordStart(parsed.request, command) : unhandled(command, 'recordStart');
      case 'recordStop':
        return h.recordStop ? h.recordStop(command) : unhandled(command, 'recordStop');
      case 'screenshot':
        return h.screenshot ? h.screenshot(parsed.request, command) : unhandled(command, 'screenshot');
    }
  }
}

function unhandled(command: RealtimeCommand, kind: CommandKind): never {
  throw new Error(
    `No handler is registered for "${command.name}" commands (the app did not call ${REGISTRATION[kind]}).`,
  );
}

/** The longest error text an ack carries; the rest of a long message is cut. */
const MAX_ERROR_LENGTH = 1024;

function messageOf(error: unknown): string {
  let text: string;
  if (error instanceof Error) text = error.message || error.name;
  else if (typeof error === 'string') text = error;
  else {
    try {
      text = JSON.stringify(error) ?? String(error);
    } catch {
      text = String(error);
    }
  }
  return text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH - 1)}…` : text;
}
