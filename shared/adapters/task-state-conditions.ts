/**
 * DynamoDB expressions for a task's state, built from the lifecycle's moves
 * (`shared/jobs/task-lifecycle.ts`): every adapter that moves a task writes its condition with
 * {@link stateIn} or {@link moveFrom} and its new state with {@link stateValue}, so no adapter
 * spells a state or a transition of its own. The expressions expect `#state` → `state`
 * ({@link STATE_NAME}).
 */
import type { TaskState } from '#shared/jobs/model.ts';
import type { TaskMove } from '#shared/jobs/task-lifecycle.ts';

export const STATE_NAME = { '#state': 'state' } as const;

const PLACEHOLDERS: Record<TaskState, string> = {
  pending: ':pending',
  'retry-wait': ':retryWait',
  'in-flight': ':inFlight',
  completed: ':completed',
  failed: ':failed',
  cancelled: ':cancelled',
  expired: ':expired',
};

/** The placeholder of a state's value, and the value. */
export function stateValue(state: TaskState): { placeholder: string; values: Record<string, TaskState> } {
  const placeholder = PLACEHOLDERS[state];
  return { placeholder, values: { [placeholder]: state } };
}

/** `#state = :x` or `#state IN (:x, :y)` for `states`, with the values it names. */
export function stateIn(states: readonly TaskState[]): {
  condition: string;
  values: Record<string, TaskState>;
} {
  const values: Record<string, TaskState> = {};
  for (const state of states) Object.assign(values, stateValue(state).values);
  const placeholders = Object.keys(values);
  const condition =
    placeholders.length === 1 ? `#state = ${placeholders[0]}` : `#state IN (${placeholders.join(', ')})`;
  return { condition, values };
}

/** The condition that a task may make `move` now (it is in one of the move's `from` states). */
export function moveFrom(move: TaskMove): { condition: string; values: Record<string, TaskState> } {
  return stateIn(move.from);
}
