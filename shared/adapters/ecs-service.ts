/**
 * The broker service on ECS: the job manager's {@link EcsServiceScaler} as `UpdateService` with a
 * desired count (ECS then starts brokers, or stops only unprotected ones, at its own pace), and
 * the version brokers should run, read from the service's primary deployment.
 *
 * Why from the deployment and not from the job manager's own configuration: the job manager's
 * function names the service, so CloudFormation updates it only after the service update has
 * settled, and the service update cannot settle while old brokers are protected with calls in
 * flight and nobody tells them to drain. The primary deployment names the new task definition as
 * soon as the service update starts.
 */
import {
  DescribeServicesCommand,
  DescribeTaskDefinitionCommand,
  type ECSClient,
  UpdateServiceCommand,
} from '@aws-sdk/client-ecs';
import type { EcsServiceScaler } from '#shared/fleet/ports.ts';

export interface EcsServiceScalerOptions {
  /** Cluster name or ARN. */
  readonly cluster: string;
  /** Service name or ARN. */
  readonly service: string;
  /** The container whose `BROKER_VERSION` environment variable names the version. */
  readonly container?: string;
}

/** The broker service; the client is built once by the caller and reused. */
export class EcsBrokerService implements EcsServiceScaler {
  readonly #options: EcsServiceScalerOptions;
  readonly #client: Pick<ECSClient, 'send'>;
  readonly #container: string;
  /** A task definition revision never changes: its version is read once. */
  readonly #versions = new Map<string, string | undefined>();

  constructor(options: EcsServiceScalerOptions, client: Pick<ECSClient, 'send'>) {
    this.#options = options;
    this.#client = client;
    this.#container = options.container ?? 'broker';
  }

  async setDesiredCount(count: number): Promise<void> {
    await this.#client.send(
      new UpdateServiceCommand({
        cluster: this.#options.cluster,
        service: this.#options.service,
        desiredCount: count,
      }),
    );
  }

  /** The `BROKER_VERSION` of the primary deployment's task definition; undefined if none is found. */
  async primaryVersion(): Promise<string | undefined> {
    const out = await this.#client.send(
      new DescribeServicesCommand({ cluster: this.#options.cluster, services: [this.#options.service] }),
    );
    const primary = out.services?.[0]?.deployments?.find((d) => d.status === 'PRIMARY');
    const arn = primary?.taskDefinition;
    if (!arn) return undefined;
    if (!this.#versions.has(arn)) this.#versions.set(arn, await this.#versionOf(arn));
    return this.#versions.get(arn);
  }

  async #versionOf(taskDefinition: string): Promise<string | undefined> {
    const definition = await this.#client.send(new DescribeTaskDefinitionCommand({ taskDefinition }));
    const env = definition.taskDefinition?.containerDefinitions?.find(
      (c) => c.name === this.#container,
    )?.environment;
    return env?.find((e) => e.name === 'BROKER_VERSION')?.value;
  }
}
