/**
 * Preloaded into each broker process of the cost bench (`NODE_OPTIONS=--import …`, set through the
 * local fleet's broker environment): counts the broker's AWS requests with {@link AwsMeter} and
 * writes them, with the process's CPU time so far, to `$BENCH_METER_DIR/{pid}.json` every half
 * second and at exit. The bench sums the files before and after each scenario.
 */
import { renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { AwsMeter, type Tally } from './aws-meter.ts';

/** What a broker process wrote: its requests and CPU seconds (user + system) so far. */
export interface BrokerMeterFile {
  readonly pid: number;
  readonly tally: Tally;
  readonly cpuSeconds: number;
  readonly at: number;
}

const dir = process.env.BENCH_METER_DIR;
if (dir) {
  const meter = new AwsMeter('broker');
  meter.install();
  const file = path.join(dir, `${process.pid}.json`);
  const write = () => {
    const cpu = process.cpuUsage();
    const out: BrokerMeterFile = {
      pid: process.pid,
      tally: meter.snapshot(),
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      at: Date.now(),
    };
    writeFileSync(`${file}.tmp`, JSON.stringify(out));
    renameSync(`${file}.tmp`, file);
  };
  setInterval(write, 500).unref();
  process.on('exit', write);
}
