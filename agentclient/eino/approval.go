package eino

import (
	"context"
	"time"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolgateway/toolgateway/agentclient"
)

// ApprovalInterrupt is the Info of the interrupt a gateway tool raises
// when the gateway's decide rules hold its call for a human (409
// approval_pending): nothing ran. The run stops with the interrupt, its
// state checkpointed; once the human answered, Invoke again with the same
// checkpoint id and the tool makes the same call (same session, step, tool
// and arguments): approved, it runs once; denied or expired, the model
// reads the refusal. Resuming before the answer only interrupts again.
type ApprovalInterrupt struct {
	// ApprovalID is the gateway's approval id (a ULID): what the operator
	// decides (admin API, console), or, for a rule with approver: caller,
	// what the app answers with [agentclient.Client.Approve] or Deny with
	// the deciding person's own token ([agentclient.DecidedBy]: an agent's
	// token cannot approve its own call).
	ApprovalID string
	// ExpiresAt is when the approval expires undecided (zero when the
	// gateway did not say).
	ExpiresAt time.Time
	// Tool is the gateway tool's name.
	Tool string
	// Arguments are the call's arguments as the model wrote them (JSON).
	Arguments string
	// Step is the call's step index in the run's session.
	Step uint64
}

// The interrupt's Info travels in Eino's interrupt state: registered under
// a name of its own, so it survives checkpoints.
func init() {
	schema.RegisterName[*ApprovalInterrupt]("toolgateway_eino_approval_interrupt")
}

// approvalInterrupt turns a pending approval into the tool's Eino interrupt.
func approvalInterrupt(ctx context.Context, pending *agentclient.ApprovalPendingError, tool, args string, step uint64) error {
	return compose.Interrupt(ctx, &ApprovalInterrupt{
		ApprovalID: pending.ApprovalID,
		ExpiresAt:  pending.ExpiresAt,
		Tool:       tool,
		Arguments:  args,
		Step:       step,
	})
}

// PendingApprovals returns the approvals an interrupted run (the error of
// Invoke) waits for: none when err is not an interrupt, or only the
// interrupt before a node (compose.WithInterruptBeforeNodes), which a
// new Invoke simply goes past. A run that waits for a human should not be
// resumed in a loop: resume it once they answered.
func PendingApprovals(err error) []*ApprovalInterrupt {
	info, ok := compose.ExtractInterruptInfo(err)
	if !ok {
		return nil
	}
	var pending []*ApprovalInterrupt
	for _, interrupt := range info.InterruptContexts {
		if approval, ok := interrupt.Info.(*ApprovalInterrupt); ok {
			pending = append(pending, approval)
		}
	}
	return pending
}
