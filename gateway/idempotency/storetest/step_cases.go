package storetest

import (
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func stepCases() []testCase {
	return []testCase{
		{"StepConflict", testStepConflict},
		{"StepFreedAfterRelease", testStepFreedAfterRelease},
		{"StepFreedAfterDelete", testStepFreedAfterDelete},
		{"StepFreedAfterExpiry", testStepFreedAfterExpiry},
	}
}

func (f *fixture) expectConflict(req idempotency.ClaimRequest, tool, executionID string) {
	f.t.Helper()
	d := f.expect(req, idempotency.OutcomeStepConflict)
	if d.Conflict == nil || d.Conflict.Tool != tool || d.Conflict.ExecutionID != executionID {
		f.t.Fatalf("step conflict names %+v, want tool %q execution id %q", d.Conflict, tool, executionID)
	}
}

func testStepConflict(f *fixture) {
	step := f.step("conflict", 3)
	first := f.request(f.scope("tool-a", "first"), fingerprintA, step)
	lease := f.claimed(first)

	// Another key on the same step: another tool, or the same tool with
	// other arguments (the agent regenerated the call after a crash).
	otherTool := f.request(f.scope("tool-b", "second"), fingerprintB, step)
	f.expectConflict(otherTool, "tool-a", first.ExecutionID)
	sameTool := f.request(f.scope("tool-a", "third"), fingerprintB, step)
	f.expectConflict(sameTool, "tool-a", first.ExecutionID)

	// A COMPLETED record keeps its step.
	f.complete(lease, jsonResponse(`{}`), replayTTL)
	f.expectConflict(f.fresh(otherTool), "tool-a", first.ExecutionID)

	// The record decides before the step: the same key at another step is
	// a replay, not a conflict.
	elsewhere := f.fresh(first)
	elsewhere.Step = f.step("conflict", 4)
	f.expect(elsewhere, idempotency.OutcomeReplay)

	// Other steps of the session are free.
	nextStep := f.fresh(otherTool)
	nextStep.Step = f.step("conflict", 5)
	f.claimed(nextStep)

	// Without the guard the step does not block.
	unguarded := f.request(f.scope("tool-b", "unguarded"), fingerprintA, step)
	unguarded.StepGuard = false
	f.claimed(unguarded)
	// Nor does a request without a step.
	f.claimed(f.request(f.scope("tool-b", "stepless"), fingerprintA, nil))
}

func testStepFreedAfterRelease(f *fixture) {
	step := f.step("release", 1)
	first := f.request(f.scope("tool", "first"), fingerprintA, step)
	lease := f.claimed(first)
	second := f.request(f.scope("tool", "second"), fingerprintB, step)
	f.expectConflict(second, "tool", first.ExecutionID)

	f.release(lease) // the tool failed: a retry may run anything at this step
	retry := f.fresh(second)
	f.claimed(retry)
	f.expectConflict(f.fresh(first), "tool", retry.ExecutionID)
}

func testStepFreedAfterDelete(f *fixture) {
	step := f.step("delete", 1)
	first := f.request(f.scope("tool", "first"), fingerprintA, step)
	f.complete(f.claimed(first), jsonResponse(`{}`), replayTTL)
	f.delete(first.Scope)
	second := f.request(f.scope("tool", "second"), fingerprintB, step)
	f.claimed(second)

	// A record re-created at another step no longer holds its old step.
	moved := f.request(f.scope("tool", "moved"), fingerprintA, f.step("delete", 2))
	f.claimed(moved)
	f.delete(moved.Scope)
	again := f.fresh(moved)
	again.Step = f.step("delete", 3)
	f.claimed(again)
	f.claimed(f.request(f.scope("tool", "after-move"), fingerprintB, f.step("delete", 2)))
}

func testStepFreedAfterExpiry(f *fixture) {
	const ttl = 300 * time.Millisecond
	step := f.step("expiry", 1)
	first := f.request(f.scope("tool", "first"), fingerprintA, step)
	f.complete(f.claimed(first), jsonResponse(`{}`), ttl)
	time.Sleep(2 * ttl)
	f.claimed(f.request(f.scope("tool", "second"), fingerprintB, step))
}
