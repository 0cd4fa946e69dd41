/**
 * The command catalogue of CONTRACT §3 comes from `@liveline/protocol` (the SDK reads the same one);
 * only what is the tenant API's alone — how long a command may wait — is declared here.
 */
import { COMMAND_LIMITS } from '@liveline/protocol';

export {
  BUILT_IN_COMMANDS,
  type CameraControlSpec,
  CameraControls as CAMERA_CONTROLS,
  isCameraControlName,
  RESERVED_COMMAND_NAMES,
  SCREENSHOT_FORMATS,
  SERVER_COMMANDS,
  VARIABLE_TYPES,
} from '@liveline/protocol';

export const LIMITS = {
  ...COMMAND_LIMITS,
  ttlSeconds: { min: 1, max: 3600, default: 30 },
};
