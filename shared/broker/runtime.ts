/**
 * The broker process's size and Node's flags: what `cdk/` gives the Fargate task, what the local
 * fleet starts brokers with, and what `bench/message-throughput.ts` runs its contenders under, so the
 * memory the bench reports is the memory a broker has.
 */

/**
 * The broker task's default size on Fargate: 1 vCPU (and 2 GiB, Fargate's least memory for it).
 * bench/message-throughput.ts measures the whole broker's own CPU on the DynamoDB path at about
 * 0.135 ms per message over a 60,000-message run with recipients held in chunks (0.25 ms a task a
 * recipient: SDK marshalling, signing, the sends): a message job at LINE's 2,000/s takes about 0.3 vCPU, and
 * a vCPU leaves room for a second job or a slower machine. Call jobs need far less; size a
 * call-only fleet down with `BrokerFleet`'s `cpu` and `memoryMiB`.
 */
export const BROKER_TASK_SIZE = { cpu: 1024, memoryMiB: 2048 } as const;

/**
 * V8's heap limits for a broker of `memoryMiB`. Left alone, V8 grows its young generation and its
 * old space with how long a process has been allocating fast, not with what it keeps: a message
 * job of 1,000,000 sends would peak far above one of 100,000 though both keep the same few MB
 * alive. Semi-spaces fixed at 16 MB keep the young generation's share flat; the old space may take
 * an eighth of the task, at most 128 MB: about four times what a broker keeps at most (the
 * pipeline's bounded queue and requests in flight: 10–35 MB measured by bench/message-throughput.ts),
 * and far below the task's limit, so a leak shows as an out-of-memory error in the logs, not a task
 * the kernel kills. (With 256 MB, V8 let a 1,000,000-message multicast job peak 9.6 % above a
 * 100,000 one, against 2.7–5 % with 128 MB.)
 */
export function brokerV8Flags(memoryMiB: number = BROKER_TASK_SIZE.memoryMiB): string[] {
  if (!Number.isInteger(memoryMiB) || memoryMiB < 512)
    throw new RangeError(`a broker needs at least 512 MiB, got ${memoryMiB}`);
  return ['--max-semi-space-size=16', `--max-old-space-size=${Math.min(128, Math.floor(memoryMiB / 8))}`];
}
