/**
 * The broker service on ECS: the job manager's {@link EcsServiceScaler} as `UpdateService` with a
 * desired count. ECS then starts brokers, or stops only unprotected ones, at its own pace.
 */
import { ECSClient, UpdateServiceCommand } from '@aws-sdk/client-ecs';
import type { EcsServiceScaler } from '#shared/fleet/ports.ts';

export interface EcsServiceScalerOptions {
  /** Cluster name or ARN. */
  readonly cluster: string;
  /** Service name or ARN. */
  readonly service: string;
}

/** A scaler for one ECS service; the client is built once by the caller and reused. */
export function makeEcsServiceScaler(
  options: EcsServiceScalerOptions,
  client: Pick<ECSClient, 'send'> = new ECSClient({}),
): EcsServiceScaler {
  return {
    async setDesiredCount(count) {
      await client.send(
        new UpdateServiceCommand({ cluster: options.cluster, service: options.service, desiredCount: count }),
      );
    },
  };
}
