/** The enumerations and camera controls of CONTRACT §3, published in /openapi.json and the SDK. */

export const RESOLUTIONS = { 0: '480p', 1: '720p', 2: '1080p', 3: '1440p', 4: '2160p' } as const;
export const ASPECT_RATIOS = { 0: '16:9', 1: '9:16', 2: '1:1', 3: '4:3', 4: '21:9' } as const;

export interface CameraControlSpec {
  kind: 'float' | 'int';
  min: number;
  max: number;
  /** For enum-valued controls: value → name. */
  values?: Record<number, string>;
}

export const CAMERA_CONTROLS: Record<string, CameraControlSpec> = {
  fieldOfView: { kind: 'float', min: 1, max: 179 },
  smoothingAmount: { kind: 'float', min: 0, max: 10 },
  cameraView: {
    kind: 'int',
    min: 0,
    max: 2,
    values: { 0: 'FirstPerson', 1: 'ThirdPerson', 2: 'ObjectAttached' },
  },
  lookType: { kind: 'int', min: 0, max: 2, values: { 0: 'Direction', 1: 'Player', 2: 'LookPosition' } },
  followDistance: { kind: 'float', min: 0, max: 100 },
  heightOffset: { kind: 'float', min: -100, max: 100 },
};

/** Names the server uses for its own commands; a tenant's custom command may not take them. */
export const BUILT_IN_COMMANDS = ['camera', 'text'] as const;
export const SERVER_COMMANDS = ['stream.start', 'stream.stop', 'record.start', 'record.stop'] as const;
export const VARIABLE_TYPES = ['string', 'bool', 'int', 'float'] as const;

export const LIMITS = {
  cameraControls: 32,
  textLength: 4096,
  variables: 256,
  nameLength: 64,
  stringValueLength: 4096,
  ttlSeconds: { min: 1, max: 3600, default: 30 },
};
