import type { FieldError } from '../../http/problem.ts';
import {
  CAMERA_CONTROLS,
  type CameraControlSpec,
  isCameraControlName,
  LIMITS,
  RESERVED_COMMAND_NAMES,
  SCREENSHOT_FORMATS,
  VARIABLE_TYPES,
} from './catalogue.ts';

/**
 * Rules of the generic command envelope (CONTRACT §3) that a JSON schema cannot say: the camera
 * controls' names and ranges, the parallel arrays of general variables, and values that must parse
 * as their declared types. The route's schema has already checked the envelope's shape.
 */
export function commandDataErrors(name: string, data: unknown): FieldError[] {
  if (name === 'camera') return cameraErrors(data);
  if (name === 'text') return textErrors(data);
  if (name === 'screenshot') return screenshotErrors(data);
  return variableErrors(name, data);
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const FLOAT_TEXT = /^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/;
const INT_TEXT = /^-?\d+$/;
const COMMAND_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const RESERVED: ReadonlySet<string> = new Set(RESERVED_COMMAND_NAMES);

function unknownKeys(obj: Record<string, unknown>, allowed: string[], base: string): FieldError[] {
  return Object.keys(obj)
    .filter((k) => !allowed.includes(k))
    .map((k) => ({ path: `${base}.${k}`, message: 'is not an allowed field' }));
}

function cameraErrors(data: unknown): FieldError[] {
  if (!isObject(data)) return [{ path: 'data', message: 'must be an object with `controls`' }];
  const errors = unknownKeys(data, ['controls'], 'data');
  const controls = data.controls;
  if (!Array.isArray(controls)) return [...errors, { path: 'data.controls', message: 'must be an array' }];
  if (controls.length < 1 || controls.length > LIMITS.cameraControls) {
    errors.push({ path: 'data.controls', message: `must hold 1 to ${LIMITS.cameraControls} controls` });
  }
  const seen = new Set<string>();
  const allowed = Object.keys(CAMERA_CONTROLS);
  controls.forEach((control, i) => {
    const at = `data.controls[${i}]`;
    if (!isObject(control)) {
      errors.push({ path: at, message: 'must be an object {name, value}' });
      return;
    }
    errors.push(...unknownKeys(control, ['name', 'value'], at));
    const { name, value } = control;
    if (typeof name !== 'string') {
      errors.push({ path: `${at}.name`, message: 'must be string' });
      return;
    }
    if (!isCameraControlName(name)) {
      errors.push({ path: `${at}.name`, message: `must be one of ${allowed.join(', ')}` });
      return;
    }
    const spec: CameraControlSpec = CAMERA_CONTROLS[name];
    if (seen.has(name)) errors.push({ path: `${at}.name`, message: `repeats ${name}` });
    seen.add(name);
    if (typeof value !== 'string') {
      errors.push({ path: `${at}.value`, message: 'must be a number written as text' });
      return;
    }
    const pattern = spec.kind === 'int' ? INT_TEXT : FLOAT_TEXT;
    const n = Number(value);
    if (!pattern.test(value) || !Number.isFinite(n)) {
      errors.push({
        path: `${at}.value`,
        message: `must be ${spec.kind === 'int' ? 'an integer' : 'a number'} written as text`,
      });
    } else if (n < spec.min || n > spec.max) {
      const names = spec.values
        ? ` (${Object.entries(spec.values)
            .map(([label, value]) => `${value} ${label}`)
            .join(', ')})`
        : '';
      errors.push({ path: `${at}.value`, message: `must be between ${spec.min} and ${spec.max}${names}` });
    }
  });
  return errors;
}

function screenshotErrors(data: unknown): FieldError[] {
  if (!isObject(data)) return [{ path: 'data', message: 'must be an object: `{}` or `{format}`' }];
  const errors = unknownKeys(data, ['format'], 'data');
  if (data.format !== undefined && !(SCREENSHOT_FORMATS as readonly unknown[]).includes(data.format)) {
    errors.push({ path: 'data.format', message: `must be one of ${SCREENSHOT_FORMATS.join(', ')}` });
  }
  return errors;
}

function textErrors(data: unknown): FieldError[] {
  if (typeof data !== 'string') return [{ path: 'data', message: 'must be a string (the message)' }];
  if (data.length < 1 || data.length > LIMITS.textLength) {
    return [{ path: 'data', message: `must be 1 to ${LIMITS.textLength} characters` }];
  }
  return [];
}

function valueError(type: string, value: string): string | null {
  switch (type) {
    case 'bool':
      return value === 'true' || value === 'false' ? null : 'must be `true` or `false`';
    case 'int': {
      if (!INT_TEXT.test(value)) return 'must be a decimal integer';
      const n = Number(value);
      return n >= -2147483648 && n <= 2147483647 ? null : 'must fit in a 32-bit signed integer';
    }
    case 'float':
      return FLOAT_TEXT.test(value) && Number.isFinite(Number(value))
        ? null
        : 'must be a finite decimal number';
    default:
      return value.length <= LIMITS.stringValueLength
        ? null
        : `must be at most ${LIMITS.stringValueLength} characters`;
  }
}

function variableErrors(name: string, data: unknown): FieldError[] {
  const errors: FieldError[] = [];
  if (!COMMAND_NAME.test(name)) {
    errors.push({ path: 'name', message: 'must be 1 to 64 characters of A-Z a-z 0-9 _ . -' });
  } else if (RESERVED.has(name)) {
    errors.push({
      path: 'name',
      message: `is reserved for the server's own commands (${[...RESERVED].join(', ')})`,
    });
  }
  if (!isObject(data))
    return [...errors, { path: 'data', message: 'must be an object {names, types, values}' }];
  errors.push(...unknownKeys(data, ['names', 'types', 'values'], 'data'));
  const arrays = ['names', 'types', 'values'] as const;
  for (const key of arrays) {
    if (!Array.isArray(data[key])) errors.push({ path: `data.${key}`, message: 'must be an array' });
  }
  if (errors.some((e) => arrays.some((k) => e.path === `data.${k}`))) return errors;
  const names = data.names as unknown[];
  const types = data.types as unknown[];
  const values = data.values as unknown[];
  if (names.length < 1 || names.length > LIMITS.variables) {
    errors.push({ path: 'data.names', message: `must hold 1 to ${LIMITS.variables} variables` });
  }
  if (types.length !== names.length || values.length !== names.length) {
    errors.push({
      path: 'data',
      message: `names, types and values must have equal lengths (got ${names.length}, ${types.length}, ${values.length})`,
    });
    return errors;
  }
  const seen = new Set<string>();
  for (let i = 0; i < names.length; i++) {
    const n = names[i];
    const t = types[i];
    const v = values[i];
    if (typeof n !== 'string' || n.length < 1 || n.length > LIMITS.nameLength) {
      errors.push({
        path: `data.names[${i}]`,
        message: `must be a string of 1 to ${LIMITS.nameLength} characters`,
      });
    } else if (RESERVED.has(n)) {
      errors.push({ path: `data.names[${i}]`, message: 'must not be a built-in command name' });
    } else if (seen.has(n)) {
      errors.push({ path: `data.names[${i}]`, message: `repeats ${n}` });
    } else {
      seen.add(n);
    }
    if (typeof t !== 'string' || !(VARIABLE_TYPES as readonly string[]).includes(t)) {
      errors.push({ path: `data.types[${i}]`, message: `must be one of ${VARIABLE_TYPES.join(', ')}` });
      continue;
    }
    if (typeof v !== 'string') {
      errors.push({ path: `data.values[${i}]`, message: 'must be a string' });
      continue;
    }
    const problem = valueError(t, v);
    if (problem) errors.push({ path: `data.values[${i}]`, message: `${problem} (type ${t})` });
  }
  return errors.slice(0, 50);
}
