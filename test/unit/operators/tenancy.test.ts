import { describe, expect, it } from 'vitest';
import { clientGroup, mayActFor, operatorFromClaims, roleIn } from '#shared/operators/tenancy.ts';

describe('a console user from their token’s groups', () => {
  it('reads each client’s role, the highest when groups name several, as API Gateway passes them', () => {
    const groups = `[${clientGroup('acme', 'viewer')} ${clientGroup('acme', 'admin')} ${clientGroup('zeta', 'operator')}]`;
    expect(operatorFromClaims({ username: 'ana', 'cognito:groups': groups })).toEqual({
      username: 'ana',
      admin: false,
      clients: ['acme', 'zeta'],
      roles: { acme: 'admin', zeta: 'operator' },
    });
  });

  it('takes a bare client group (from before roles) as an operator, never an admin', () => {
    const ana = operatorFromClaims({ username: 'ana', 'cognito:groups': ['client:acme'] });
    expect(ana.roles).toEqual({ acme: 'operator' });
    expect(mayActFor(ana, 'acme', 'operator')).toBe(true);
    expect(mayActFor(ana, 'acme', 'admin')).toBe(false);
  });

  it('ignores groups that name no client or no known role', () => {
    const groups = ['client:', 'client:acme:superuser', 'client:a:b:viewer:x', 'clients:acme', 'acme'];
    expect(operatorFromClaims({ username: 'ana', 'cognito:groups': groups }).roles).toEqual({});
  });

  it('makes an installation administrator every client’s admin', () => {
    const boss = operatorFromClaims({ username: 'boss', 'cognito:groups': ['admins'] });
    expect(roleIn(boss, 'any-client')).toBe('admin');
    expect(mayActFor(boss, 'any-client', 'admin')).toBe(true);
  });
});
