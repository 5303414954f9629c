package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/wire"
)

// approvalExpiry is how long approvals stay pending on the scratch
// gateway that checks they expire.
const approvalExpiry = 100 * time.Millisecond

// approvalCall finds arguments the tool's rules send for approval and
// makes the first call with them: the approval id, or why the guarantee
// does not apply (na) or failed.
func approvalCall(ctx context.Context, env *scratchEnv, t *checkedTool, c *toolCall) (id, na, failure string, other []byte) {
	if env.opts.Decisions[t.name].Rules() == 0 {
		return "", t.name + " has no decide rules", "", nil
	}
	if env.opts.Mode == decide.ModeObserve {
		return "", "mode is observe: approvals are reported, not enforced", "", nil
	}
	if why, ok := needsRecords(t); !ok {
		return "", why, "", nil
	}
	args, other := argsDecided(ctx, env, t, *c, decide.Approve)
	if args == nil {
		return "", "none of the arguments verify made needs an approval by " + t.name + "'s decide rules", "", nil
	}
	c.args = args
	resp, err := env.call(ctx, *c)
	if err != nil {
		return "", "", err.Error(), nil
	}
	var p struct {
		Code       string `json:"code"`
		ApprovalID string `json:"approval_id"`
	}
	_ = json.Unmarshal(resp.body, &p)
	if resp.status != http.StatusConflict || p.Code != wire.CodeApprovalPending || p.ApprovalID == "" {
		return "", "", fmt.Sprintf("a call its rules send for approval answered %d %s, not 409 %s", resp.status, resp.body, wire.CodeApprovalPending), nil
	}
	return p.ApprovalID, "", "", other
}

// approve grants approval id in the scratch store, as an operator would.
func approve(ctx context.Context, env *scratchEnv, id string) error {
	a, ok := env.store.(idempotency.Approvals)
	if !ok {
		return fmt.Errorf("the scratch store keeps no approvals")
	}
	_, err := a.DecideApproval(ctx, id, idempotency.ApprovalDecision{Approve: true, By: "gateway verify"})
	return err
}

// approvedCall makes c, a call the tool's rules send for approval, and
// approves it; verdict is set (N/A or FAIL, with detail) when that could
// not be done. other is arguments of the same rule's other call.
func approvedCall(ctx context.Context, env *scratchEnv, t *checkedTool, c *toolCall) (other []byte, verdict, detail string) {
	id, na, failure, other := approvalCall(ctx, env, t, c)
	switch {
	case na != "":
		return nil, NA, na
	case failure != "":
		return nil, Fail, failure
	}
	if err := approve(ctx, env, id); err != nil {
		return nil, Fail, err.Error()
	}
	return other, "", ""
}

func checkApprovalOtherArgs(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	c := toolCall{tool: t.name, session: env.session(), step: 1, decided: true}
	other, verdict, detail := approvedCall(ctx, env, t, &c)
	if verdict != "" {
		return verdict, detail
	}
	resp, n, err := callWithArgs(ctx, env, t, c, other)
	switch {
	case err != nil:
		return Fail, err.Error()
	case n != 0:
		return Fail, fmt.Sprintf("after approving %s, other arguments at the same step ran the tool (answered %d)", c.args, resp.status)
	}
	return Pass, fmt.Sprintf("approved call's step with other arguments answered %d, not run", resp.status)
}

func checkApprovalUsedOnce(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	c := toolCall{tool: t.name, session: env.session(), step: 1, decided: true}
	if _, verdict, detail := approvedCall(ctx, env, t, &c); verdict != "" {
		return verdict, detail
	}
	const racers = 8
	answers, n, _ := raceCalls(ctx, env, t, c, racers)
	statuses := map[int]int{}
	for _, resp := range answers {
		statuses[resp.status]++
	}
	switch {
	case n == 0 && statuses[http.StatusOK] == 0:
		// Refused after the approval (a rule or a limit the call meets
		// now): an approval that was not used proves nothing about its
		// being used once.
		return NA, fmt.Sprintf("not exercised: the approved call was refused every time (statuses %v)", statuses)
	case n != 1:
		return Fail, fmt.Sprintf("%d calls of an approved key ran the tool %d times (statuses %v)", racers, n, statuses)
	}
	return Pass, fmt.Sprintf("%d calls of an approved key, 1 execution", racers)
}

func checkApprovalExpires(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	c := toolCall{tool: t.name, session: env.session(), step: 1, expiring: true}
	_, na, failure, _ := approvalCall(ctx, env, t, &c)
	switch {
	case na != "":
		return NA, na
	case failure != "":
		return Fail, failure
	}
	time.Sleep(2 * approvalExpiry) // nobody decides in time
	resp, n, err := callCounting(ctx, env, t, c)
	switch {
	case err != nil:
		return Fail, err.Error()
	case n != 0:
		return Fail, fmt.Sprintf("a call whose approval expired ran the tool (answered %d)", resp.status)
	case resp.status != http.StatusForbidden || problemCode(resp.body) != wire.CodeApprovalExpired:
		return Fail, fmt.Sprintf("a call pending past approvals.timeout answered %d %s, not 403 %s", resp.status, resp.body, wire.CodeApprovalExpired)
	}
	return Pass, fmt.Sprintf("pending past approvals.timeout: 403 %s, not run", wire.CodeApprovalExpired)
}
