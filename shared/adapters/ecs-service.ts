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

export interface EcsBrokerService extends EcsServiceScaler {
  /** The `BROKER_VERSION` of the primary deployment's task definition; undefined if none is found. */
  primaryVersion(): Promise<string | undefined>;
}

/** The broker service; the client is built once by the caller and reused. */
export function makeEcsServiceScaler(
  options: EcsServiceScalerOptions,
  client: Pick<ECSClient, 'send'>,
): EcsBrokerService {
  // A task definition revision never changes: its version is read once.
  const versions = new Map<string, string | undefined>();
  const container = options.container ?? 'broker';
  return {
    async setDesiredCount(count) {
      await client.send(
        new UpdateServiceCommand({ cluster: options.cluster, service: options.service, desiredCount: count }),
      );
    },
    async primaryVersion() {
      const out = await client.send(
        new DescribeServicesCommand({ cluster: options.cluster, services: [options.service] }),
      );
      const primary = out.services?.[0]?.deployments?.find((d) => d.status === 'PRIMARY');
      const arn = primary?.taskDefinition;
      if (!arn) return undefined;
      if (!versions.has(arn)) {
        const definition = await client.send(new DescribeTaskDefinitionCommand({ taskDefinition: arn }));
        const env = definition.taskDefinition?.containerDefinitions?.find(
          (c) => c.name === container,
        )?.environment;
        versions.set(arn, env?.find((e) => e.name === 'BROKER_VERSION')?.value);
      }
      return versions.get(arn);
    },
  };
}
