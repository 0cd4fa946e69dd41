/**
 * The enumerations of CONTRACT §3. Values are the integers that travel on the wire (`resolution`,
 * `aspectratio`, camera `cameraView`/`lookType`); names are for app code; labels are for people.
 */
import { Type } from 'typebox';

/** Video resolution of a stream (`resolution` on the wire). */
export const Resolution = { P480: 0, P720: 1, P1080: 2, P1440: 3, P2160: 4 } as const;
export type Resolution = (typeof Resolution)[keyof typeof Resolution];

/** Aspect ratio of a stream (`aspectratio` on the wire). */
export const AspectRatio = { R16x9: 0, R9x16: 1, R1x1: 2, R4x3: 3, R21x9: 4 } as const;
export type AspectRatio = (typeof AspectRatio)[keyof typeof AspectRatio];

/** How each resolution is written for people. */
export const RESOLUTION_LABELS = {
  0: '480p',
  1: '720p',
  2: '1080p',
  3: '1440p',
  4: '2160p',
} as const satisfies Record<Resolution, string>;

/** How each aspect ratio is written for people. */
export const ASPECT_RATIO_LABELS = {
  0: '16:9',
  1: '9:16',
  2: '1:1',
  3: '4:3',
  4: '21:9',
} as const satisfies Record<AspectRatio, string>;

const describe = (labels: Record<number, string>) =>
  `${Object.entries(labels)
    .map(([value, label]) => `${value} = ${label}`)
    .join(', ')}.`;

/** `resolution` as a schema: an integer 0–4, documented with its labels. */
export const ResolutionSchema = Type.Integer({
  format: 'int32',
  minimum: 0,
  maximum: 4,
  description: describe(RESOLUTION_LABELS),
});

/** `aspectratio` as a schema: an integer 0–4, documented with its labels. */
export const AspectRatioSchema = Type.Integer({
  format: 'int32',
  minimum: 0,
  maximum: 4,
  description: describe(ASPECT_RATIO_LABELS),
});

/** Camera placement (camera control `cameraView`). */
export const CameraView = { FirstPerson: 0, ThirdPerson: 1, ObjectAttached: 2 } as const;
export type CameraView = (typeof CameraView)[keyof typeof CameraView];

/** What the camera looks at (camera control `lookType`). */
export const LookType = { Direction: 0, Player: 1, LookPosition: 2 } as const;
export type LookType = (typeof LookType)[keyof typeof LookType];

/** How a camera control's value is read and which values it accepts (inclusive bounds). */
export interface CameraControlSpec {
  readonly kind: 'float' | 'int';
  readonly min: number;
  readonly max: number;
  /** For enum-valued controls: the enumeration (name → integer) whose values are allowed. */
  readonly values?: Readonly<Record<string, number>>;
}

/** Every camera control a `camera` command may carry, with its kind and range. */
export const CameraControls = {
  fieldOfView: { kind: 'float', min: 1, max: 179 },
  smoothingAmount: { kind: 'float', min: 0, max: 10 },
  cameraView: { kind: 'int', min: 0, max: 2, values: CameraView },
  lookType: { kind: 'int', min: 0, max: 2, values: LookType },
  followDistance: { kind: 'float', min: 0, max: 100 },
  heightOffset: { kind: 'float', min: -100, max: 100 },
} as const satisfies Record<string, CameraControlSpec>;
export type CameraControlName = keyof typeof CameraControls;

export const cameraControlNames = Object.keys(CameraControls) as CameraControlName[];

export function isCameraControlName(name: string): name is CameraControlName {
  return Object.hasOwn(CameraControls, name);
}
