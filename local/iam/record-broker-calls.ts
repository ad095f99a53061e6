/**
 * Preloaded (`node --import`) into a broker process the local fleet starts while the test suites
 * record AWS calls: every call the broker makes is recorded as the broker task role's.
 */
import { AWS_CALL_LOG_ENV, startAwsCallLog } from './recorder.ts';

const dir = process.env[AWS_CALL_LOG_ENV];
if (dir) startAwsCallLog({ dir, principal: 'broker' });
