/**
 * The broker process's size and Node's flags: what `cdk/` gives the Fargate task, what the local
 * fleet starts brokers with, and what `bench/message-throughput` runs its contenders under, so the
 * memory the bench reports is the memory a broker has.
 */

/** The broker task's default size on Fargate (0.5 vCPU, 1 GiB). */
export const BROKER_TASK_SIZE = { cpu: 512, memoryMiB: 1024 } as const;

/**
 * V8's heap limits for a broker of `memoryMiB`. Left alone, V8 grows its young generation and its
 * old space with how long a process has been allocating fast, not with what it keeps: a message
 * job of 1,000,000 sends would peak far above one of 100,000 though both keep the same few MB
 * alive. Semi-spaces fixed at 16 MB keep the young generation's share flat; the old space may take
 * an eighth of the task (128 MB of 1 GiB): four times what a broker keeps at most (the pipeline's
 * bounded queue and requests in flight: 10–35 MB measured by bench/message-throughput), and far
 * below the task's limit, so a leak shows as an out-of-memory error in the logs, not a task the
 * kernel kills. (At a quarter, V8 let a 1,000,000-message multicast job peak 9.6 % above a
 * 100,000 one, against 2.7 % at an eighth.)
 */
export function brokerV8Flags(memoryMiB: number = BROKER_TASK_SIZE.memoryMiB): string[] {
  if (!Number.isInteger(memoryMiB) || memoryMiB < 512)
    throw new RangeError(`a broker needs at least 512 MiB, got ${memoryMiB}`);
  return ['--max-semi-space-size=16', `--max-old-space-size=${Math.floor(memoryMiB / 8)}`];
}
