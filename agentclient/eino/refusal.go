package eino

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/wire"
)

// modelVisible are the refusals the model can act on: change its
// arguments, make the call again as a new one, or tell the user. Others
// (auth, an unknown tool, a malformed key) are the application's bugs, and
// retryable answers may still succeed: they end the run as errors. The
// TypeScript adapters hand the model the same codes, in the same words.
var modelVisible = map[string]bool{
	wire.CodeStepConflict:             true,
	wire.CodeIdempotencyKeyReused:     true,
	wire.CodeInvalidArguments:         true,
	wire.CodeOutcomeUnknown:           true,
	wire.CodePayloadTooLarge:          true,
	wire.CodeUpstreamResponseTooLarge: true,
	wire.CodeCallDenied:               true,
	wire.CodeApprovalDenied:           true,
	wire.CodeApprovalExpired:          true,
}

// RefusalText returns the text the model is shown, as the tool's result,
// when the gateway refused the call of tool at step for good with a refusal
// the model can act on (above all step_conflict: the model regenerated this
// step with another call after a restart or in a fork), and false for any
// other error, which the tool returns as its error.
func RefusalText(tool string, step uint64, err error) (string, bool) {
	var problem *agentclient.Error
	if !errors.As(err, &problem) || problem.Retryable || !modelVisible[problem.Code] {
		return "", false
	}
	if problem.Code == wire.CodeStepConflict {
		earlier := "another call"
		if problem.Tool != "" {
			earlier = "a call of " + problem.Tool
		}
		execution := ""
		if problem.ExecutionID != "" {
			execution = " (execution " + problem.ExecutionID + ")"
		}
		return fmt.Sprintf("step_conflict: this call of %s was NOT run. Step %d of this conversation already ran %s%s with other arguments: "+
			"an earlier attempt at this turn (before a restart, or in another branch of this conversation). "+
			"Its effect has happened; its result is not available here. "+
			"If this call is still needed, make it again: it will run as a new call.", tool, step, earlier, execution), true
	}
	if text, ok := deniedText(tool, problem); ok {
		return text, true
	}
	what := problem.Detail
	if what == "" {
		what = problem.Title
	}
	code := problem.Code
	if code == "" {
		code = "error"
	}
	// The violations tell the model what to fix in its arguments.
	violations := ""
	if problem.Code == wire.CodeInvalidArguments && len(problem.Errors) > 0 {
		violations = " " + compactJSON(problem.Errors)
	}
	return fmt.Sprintf("The gateway refused this call of %s (%d %s): %s%s", tool, problem.Status, code, what, violations), true
}

// deniedText is the text for a call the gateway will not run: denied by
// the tool's rules (call_denied), by a human (approval_denied), or not
// approved in time (approval_expired). The model should not make it again.
func deniedText(tool string, problem *agentclient.Error) (string, bool) {
	var what string
	switch problem.Code {
	case wire.CodeCallDenied:
		what = "denied by the tool's rules"
	case wire.CodeApprovalDenied:
		what = "denied"
		if problem.By != "" {
			what += " by " + problem.By
		}
	case wire.CodeApprovalExpired:
		what = "not approved in time"
	default:
		return "", false
	}
	why := ""
	if problem.Reason != "" {
		why = ": " + problem.Reason
	}
	return fmt.Sprintf("This call of %s was NOT run: it was %s%s (%s). Do not make it again; tell the user.", tool, what, why, problem.Code), true
}

// compactJSON is v as JSON without HTML escaping, as JavaScript's
// JSON.stringify writes it, so every adapter shows the model the same text.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
