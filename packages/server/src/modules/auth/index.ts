// The face of the auth module: everything outside it imports from here only.
export { type KeyInfo, KeyRing, MAX_TOKEN_LIFETIME_S } from './keys.ts';
export type { OperatorToken } from './operator.ts';
export { type AuthRoutesOptions, authRoutes } from './routes/plugin.ts';
export { isScope, SCOPES, type Scope } from './scopes.ts';
export {
  type AccessToken,
  AUTH_REFRESH_MS,
  type AuthChange,
  type AuthConfig,
  type AuthDeps,
  AuthService,
  type ClientInfo,
  createAuth,
  type DeviceToken,
  SECRET_ROTATION_OVERLAP_MS,
  type Tenant,
  type TenantRetention,
  type TokenRefusal,
} from './service.ts';
export type { DevicePrincipal, OperatorPrincipal, Principal, TenantPrincipal } from './tokens.ts';
