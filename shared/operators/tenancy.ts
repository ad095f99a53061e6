/**
 * Who a console user is, which clients they may see, and what they may do in each. A user signs in
 * to the Cognito user pool; their groups are their clients and roles: `client:{clientId}:{role}`
 * for each client they belong to, and `admins` for the operators of the whole installation (every
 * client, and the creation of new ones). A role is `viewer` (reads), `operator` (also jobs, pause,
 * resume, cancel, suppressions) or `admin` (also settings and contract limits, channels); each
 * includes the ones before it. The group `client:{clientId}` without a role, from before roles,
 * makes an operator: it no longer changes settings. The JWT authorizer has verified the token
 * before the handler runs; this module only reads its claims.
 */

/** The group of the installation's administrators: every client is theirs. */
export const ADMINS_GROUP = 'admins';

const CLIENT_GROUP_PREFIX = 'client:';

/** A user's roles in a client, each allowing what the ones before it allow. */
export const CLIENT_ROLES = ['viewer', 'operator', 'admin'] as const;
export type ClientRole = (typeof CLIENT_ROLES)[number];

/** The role of a group `client:{clientId}` named with no role (the groups made before roles). */
export const ROLE_OF_A_BARE_CLIENT_GROUP: ClientRole = 'operator';

/** The Cognito group whose members act for `clientId` in `role`. */
export function clientGroup(clientId: string, role: ClientRole): string {
  return `${CLIENT_GROUP_PREFIX}${clientId}:${role}`;
}

/** Whether `role` allows what `needed` allows. */
export function includesRole(role: ClientRole | undefined, needed: ClientRole): boolean {
  return role !== undefined && CLIENT_ROLES.indexOf(role) >= CLIENT_ROLES.indexOf(needed);
}

/** A signed-in console user. */
export interface Operator {
  /** The user pool's user name (`username` in an access token, `cognito:username` in an ID token). */
  readonly username: string;
  readonly admin: boolean;
  /** The clients the user belongs to, sorted. An admin may act for others too. */
  readonly clients: readonly string[];
  /** The user's role in each of `clients` (the highest, when their groups name several). */
  readonly roles: Readonly<Record<string, ClientRole>>;
}

/** A claim as it reaches a Lambda: API Gateway's HTTP API passes every claim as a string. */
export type ClaimValue = string | number | boolean | readonly string[];

/**
 * The operator a verified token's claims describe. HTTP API's JWT authorizer hands claims to the
 * integration as strings, an array claim written as `[a b c]` (its elements joined by spaces in
 * brackets); a claim that is still an array (another caller of the same code) is taken as it is.
 */
export function operatorFromClaims(claims: Readonly<Record<string, ClaimValue>>): Operator {
  const groups = claimList(claims['cognito:groups']);
  const username = String(claims.username ?? claims['cognito:username'] ?? claims.sub ?? '');
  const roles: Record<string, ClientRole> = {};
  for (const group of groups) {
    const member = clientMembership(group);
    if (member && !includesRole(roles[member.clientId], member.role)) roles[member.clientId] = member.role;
  }
  const clients = Object.keys(roles).sort();
  return {
    username,
    admin: groups.includes(ADMINS_GROUP),
    clients,
    roles: Object.fromEntries(clients.map((c) => [c, roles[c]!])),
  };
}

/** The client and role a group names (`client:{id}:{role}`, or `client:{id}`), if it names one. */
function clientMembership(group: string): { clientId: string; role: ClientRole } | undefined {
  if (!group.startsWith(CLIENT_GROUP_PREFIX)) return undefined;
  const rest = group.slice(CLIENT_GROUP_PREFIX.length);
  const colon = rest.lastIndexOf(':');
  const role = rest.slice(colon + 1);
  if (colon > 0 && (CLIENT_ROLES as readonly string[]).includes(role)) {
    return { clientId: rest.slice(0, colon), role: role as ClientRole };
  }
  // A client id holds no colon (`isValidClientId`): anything else after the prefix is no client.
  return rest.length > 0 && !rest.includes(':')
    ? { clientId: rest, role: ROLE_OF_A_BARE_CLIENT_GROUP }
    : undefined;
}

/** The role `operator` has in `clientId`: an installation administrator is every client's admin. */
export function roleIn(operator: Operator, clientId: string): ClientRole | undefined {
  return operator.admin ? 'admin' : operator.roles[clientId];
}

/** Whether `operator` may do what `needed` allows in `clientId` (by default: read it). */
export function mayActFor(operator: Operator, clientId: string, needed: ClientRole = 'viewer'): boolean {
  return includesRole(roleIn(operator, clientId), needed);
}

function claimList(value: ClaimValue | undefined): readonly string[] {
  if (value === undefined) return [];
  if (Array.isArray(value)) return value.map(String);
  const text = String(value).trim();
  const inner = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  return inner.split(/[\s,]+/).filter((item) => item.length > 0);
}
