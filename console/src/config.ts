/** Where the console signs in: read from `/console/config.json`, which the console's Lambda writes. */
export interface ConsoleConfig {
  readonly region: string;
  readonly userPoolId: string;
  readonly userPoolClientId: string;
  readonly cognitoEndpoint?: string;
}

export async function loadConfig(): Promise<ConsoleConfig> {
  const response = await fetch('/console/config.json', { cache: 'no-cache' });
  if (!response.ok) throw new Error(`could not read the console's configuration (${response.status})`);
  return (await response.json()) as ConsoleConfig;
}
