/**
 * Who a console user is and which clients they may see and change. A user signs in to the
 * Cognito user pool; their groups are their clients: `client:{clientId}` for each client they
 * belong to, and `admins` for the operators of the whole installation (every client, and the
 * creation of new ones). The JWT authorizer has verified the token before the handler runs; this
 * module only reads its claims.
 */

/** The group of the installation's administrators: every client is theirs. */
export const ADMINS_GROUP = 'admins';

const CLIENT_GROUP_PREFIX = 'client:';

/** The Cognito group whose members act for `clientId`. */
export function clientGroup(clientId: string): string {
  return `${CLIENT_GROUP_PREFIX}${clientId}`;
}

/** A signed-in console user. */
export interface Operator {
  /** The user pool's user name (`username` in an access token, `cognito:username` in an ID token). */
  readonly username: string;
  readonly admin: boolean;
  /** The clients the user belongs to, sorted. An admin may act for others too. */
  readonly clients: readonly string[];
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
  const clients = groups
    .filter((group) => group.startsWith(CLIENT_GROUP_PREFIX) && group.length > CLIENT_GROUP_PREFIX.length)
    .map((group) => group.slice(CLIENT_GROUP_PREFIX.length))
    .sort();
  return { username, admin: groups.includes(ADMINS_GROUP), clients: [...new Set(clients)] };
}

/** Whether `operator` may read and change `clientId`'s settings, jobs and reports. */
export function mayActFor(operator: Operator, clientId: string): boolean {
  return operator.admin || operator.clients.includes(clientId);
}

function claimList(value: ClaimValue | undefined): readonly string[] {
  if (value === undefined) return [];
  if (Array.isArray(value)) return value.map(String);
  const text = String(value).trim();
  const inner = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  return inner.split(/[\s,]+/).filter((item) => item.length > 0);
}
