import { describe, expect, it } from 'vitest';
import { matchRoute, routeKey, routes } from '#shared/routes.ts';

describe('route table', () => {
  it('matches a path parameter and decodes it', () => {
    const match = matchRoute(routes, 'POST', '/webhooks/line/chan%2D1');
    expect(match?.route.functionId).toBe('webhook-receiver');
    expect(match?.pathParameters).toEqual({ channelId: 'chan-1' });
    expect(routeKey(match!.route)).toBe('POST /webhooks/line/{channelId}');
  });

  it('does not match another method, an empty parameter or extra segments', () => {
    expect(matchRoute(routes, 'GET', '/webhooks/line/c1')).toBeUndefined();
    expect(matchRoute(routes, 'POST', '/webhooks/line/')).toBeUndefined();
    expect(matchRoute(routes, 'POST', '/webhooks/line/c1/x')).toBeUndefined();
  });
});
