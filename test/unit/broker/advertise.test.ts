import { describe, expect, it } from 'vitest';
import { advertisedEndpoint, BrokerStartError } from '#worker/advertise.ts';

const server = { url: 'http://127.0.0.1:8080', port: 8080 };
const metadata = 'http://169.254.170.2/v4/abc';
const noSleep = async () => {};
const answer = (status: number, body: unknown) =>
  (async () => new Response(JSON.stringify(body), { status })) as unknown as typeof fetch;

describe('the address a broker advertises in its lease', () => {
  it("is the task's private address from the metadata endpoint", async () => {
    const fetch = answer(200, { Networks: [{ IPv4Addresses: ['10.0.1.23'] }] });
    const url = await advertisedEndpoint({ advertiseUrl: undefined, httpHost: '0.0.0.0' }, server, metadata, {
      fetch,
      sleep: noSleep,
    });
    expect(url).toBe('http://10.0.1.23:8080');
  });

  it('retries a failing metadata endpoint, then answers', async () => {
    let calls = 0;
    const fetch: typeof globalThis.fetch = (async () => {
      calls++;
      if (calls < 3) throw new Error('ECONNREFUSED');
      return new Response(JSON.stringify({ Networks: [{ IPv4Addresses: ['10.0.1.7'] }] }));
    }) as unknown as typeof globalThis.fetch;
    const url = await advertisedEndpoint({ advertiseUrl: undefined, httpHost: '0.0.0.0' }, server, metadata, {
      fetch,
      sleep: noSleep,
    });
    expect(url).toBe('http://10.0.1.7:8080');
    expect(calls).toBe(3);
  });

  it('fails to start, loudly, when the metadata never names an address (never 0.0.0.0)', async () => {
    for (const fetch of [answer(500, {}), answer(200, { Networks: [] })]) {
      await expect(
        advertisedEndpoint({ advertiseUrl: undefined, httpHost: '0.0.0.0' }, server, metadata, {
          fetch,
          sleep: noSleep,
        }),
      ).rejects.toThrow(BrokerStartError);
    }
  });

  it('refuses a wildcard listen address without metadata, and takes BROKER_ADVERTISE_URL as given', async () => {
    await expect(
      advertisedEndpoint({ advertiseUrl: undefined, httpHost: '0.0.0.0' }, server, undefined),
    ).rejects.toThrow(/BROKER_ADVERTISE_URL/);
    expect(
      await advertisedEndpoint({ advertiseUrl: 'http://b:1', httpHost: '0.0.0.0' }, server, undefined),
    ).toBe('http://b:1');
    expect(
      await advertisedEndpoint({ advertiseUrl: undefined, httpHost: '127.0.0.1' }, server, undefined),
    ).toBe(server.url);
  });
});
