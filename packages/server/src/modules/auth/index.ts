// The face of the auth module: everything outside it imports from here only.
export { loadServerKeys, type ServerKeys } from './keys.ts';
export type { OperatorToken } from './operator.ts';
export { type AuthRoutesOptions, authRoutes } from './routes/plugin.ts';
export { isScope, SCOPES, type Scope } from './scopes.ts';
export {
  type AccessToken,
  type AuthConfig,
  type AuthDeps,
  AuthService,
  type ClientInfo,
  createAuth,
  type DeviceToken,
  type Tenant,
} from './service.ts';
export type { DevicePrincipal, OperatorPrincipal, Principal, TenantPrincipal } from './tokens.ts';
