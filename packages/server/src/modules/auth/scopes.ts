export const SCOPES = [
  'sessions:read',
  'commands:send',
  'events:write',
  'tokens:issue',
  'webhooks:manage',
  'campaigns:manage',
  'players:manage',
] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}
