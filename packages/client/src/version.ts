/** Sent as `device.sdkVersion` when the app does not name one; keep in step with package.json. */
export const SDK_VERSION = '0.1.0';
