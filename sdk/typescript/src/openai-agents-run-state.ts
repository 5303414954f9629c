/**
 * The one place the OpenAI Agents adapter reads a RunState's private
 * fields. `state.history` leaves out the function calls that have no output
 * yet, which in an interrupted (approval) turn are exactly the calls a
 * resumed run is about to make: numbering calls from it would give them
 * wrong steps, quietly. So the items come from `_originalInput` and
 * `_generatedItems`, which `@openai/agents` does not promise to keep: when
 * they are missing this throws instead of falling back.
 *
 * @module
 * @internal
 */
import type { RunState } from "@openai/agents";

/**
 * The `@openai/agents` version whose RunState fields {@link runStateItems}
 * reads. test/openai-agents-run-state.test.ts checks it against the
 * version in the lock file, so a dependency update makes the fields be
 * checked again.
 */
export const runStateCheckedWith = "0.20.0";

/**
 * The items of a RunState in the order the model made them: the run's
 * input, then the items the run generated, the calls of an interrupted turn
 * included (as `tool_call_item`s; the approval items that wrap the same
 * calls again are not function-call items and do not count).
 *
 * @throws Error: the state has no `_originalInput` (a string or an item
 *   list) or no `_generatedItems` list, i.e. an `@openai/agents` whose
 *   RunState this adapter was not checked against.
 */
export function runStateItems(state: RunState<any, any>): unknown[] {
  const fields = state as unknown as { _originalInput?: unknown; _generatedItems?: unknown };
  const input = fields._originalInput;
  const generated = fields._generatedItems;
  if (!Array.isArray(generated) || (typeof input !== "string" && !Array.isArray(input))) {
    throw new Error(
      `toolgateway: this RunState has no _originalInput or _generatedItems list, which gateway.resume(state) reads ` +
        `to number the calls of the interrupted turn (state.history leaves them out); checked with @openai/agents ` +
        `${runStateCheckedWith}: use that version, or a toolgateway release that supports yours`,
    );
  }
  return [...(Array.isArray(input) ? input : []), ...generated];
}
