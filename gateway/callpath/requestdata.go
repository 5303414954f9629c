package callpath

import (
	"context"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// What a request learns on its way through the handlers (tool, tenant, key
// prefix, door, outcome label), kept in its context for the one access-log
// line and the request metrics written when it ends.

// Labels: the values of the "outcome" label of the request metrics and
// field of the access log. The set is fixed so no label value ever comes
// from user input; problemCodes maps each problem code to one of them.
const (
	labelExecuted       = "executed"
	labelReplayed       = "replayed"
	labelInProgress     = "in_progress"
	labelKeyReused      = "key_reused"
	labelKeyMismatch    = "key_mismatch"
	labelStepConflict   = "step_conflict"
	labelEffectConflict = "effect_conflict"
	labelBudgetExceeded = "budget_exceeded"
	labelOutcomeUnknown = "outcome_unknown"
	labelInvalid        = "invalid"
	labelUnauthorized   = "unauthorized"
	labelNotFound       = "not_found"
	labelRateLimited    = "rate_limited"
	labelToolError      = "tool_error"
	labelStoreError     = "store_error"
	labelOther          = "other"
	// labelToolChanged: a held tool (its definition changed since it was
	// pinned) refused the call; nothing ran.
	labelToolChanged = "tool_changed"
)

// requestInfo collects what the handlers learn about a request, for the one
// log line and the metrics written when it ends.
type requestInfo struct {
	id        string // the request id (requestid.go)
	tool      string // a configured tool name, or "" (→ "unknown")
	tenant    string
	keyPrefix string
	label     string // the outcome label (see the label constants)
	route     string // set by handlers whose pattern is fixed; "" asks chi
	api       API    // the door of a tool call ("" for other requests)
	start     time.Time
	// counted: the call path already observed the request metrics.
	counted bool
	// previousToken: the caller authenticated with a token being rotated
	// out (auth.go), which the log line says.
	previousToken bool
}

type requestInfoKey struct{}

func infoFrom(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// setLabel records the tool (when known) and the outcome label of the request.
func setLabel(ctx context.Context, tool, label string) {
	if info := infoFrom(ctx); info != nil {
		if tool != "" {
			info.tool = tool
		}
		info.label = label
	}
}

// setPreviousToken records that the caller used its previous token.
func setPreviousToken(ctx context.Context) {
	if info := infoFrom(ctx); info != nil {
		info.previousToken = true
	}
}

// setAPI records the door a tool call came in by.
func setAPI(ctx context.Context, api API) {
	if info := infoFrom(ctx); info != nil {
		info.api = api
	}
}

// markCounted notes that the call path observed the request metrics, so the
// access log does not count the request a second time.
func markCounted(ctx context.Context) {
	if info := infoFrom(ctx); info != nil {
		info.counted = true
	}
}

// requestStart returns when the request arrived (zero outside a request).
func requestStart(ctx context.Context) time.Time {
	if info := infoFrom(ctx); info != nil {
		return info.start
	}
	return time.Time{}
}

func setTenant(ctx context.Context, tenant string) {
	if info := infoFrom(ctx); info != nil {
		info.tenant = tenant
	}
}

// setKey records the first characters of the key: enough to correlate log
// lines, never the whole key (a key can be replayed by whoever reads it).
func setKey(ctx context.Context, key string) {
	if info := infoFrom(ctx); info != nil {
		info.keyPrefix = idempotency.KeyPrefix(key)
	}
}
