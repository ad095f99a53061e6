/**
 * Starts an emulator's HTTP server on 127.0.0.1 (`port`, or a free one when 0) and hands back its
 * URL and a close that ends keep-alive connections too (a test's stop must not wait for them).
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Listening {
  readonly url: string;
  close(): Promise<void>;
}

export async function listenLocally(server: Server, port = 0): Promise<Listening> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
