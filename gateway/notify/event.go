package notify

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// EventPending is the `type` of a new pending approval's notification.
const EventPending = "approval.pending"

// Pending is a new pending approval, as the call path knows it.
type Pending struct {
	// ApprovalID is the approval's ULID.
	ApprovalID string
	// Tool, Tenant and Session name the call; Session is "" when the call
	// carries none.
	Tool, Tenant, Session string
	// Step is the agent step, sent only when HasStep.
	Step    uint64
	HasStep bool
	// CanonicalArguments is the call's JCS arguments; it must be JSON.
	CanonicalArguments json.RawMessage
	// Rule is the index of the decide rule that asked for approval, and
	// Reason its reason.
	Rule   int
	Reason string
	// RequestedAt and ExpiresAt bound the approval.
	RequestedAt, ExpiresAt time.Time
}

// payload is the wire form of [Pending]; the package doc shows it.
type payload struct {
	Type               string          `json:"type"`
	ApprovalID         string          `json:"approval_id"`
	Tool               string          `json:"tool"`
	Tenant             string          `json:"tenant"`
	Session            string          `json:"session,omitempty"`
	Step               *uint64         `json:"step,omitempty"`
	CanonicalArguments json.RawMessage `json:"canonical_arguments"`
	Rule               int             `json:"rule"`
	Reason             string          `json:"reason,omitempty"`
	RequestedAt        string          `json:"requested_at"`
	ExpiresAt          string          `json:"expires_at"`
	ConsoleURL         string          `json:"console_url,omitempty"`
}

// body encodes p as a notification, linking the console when consoleBase
// is set.
func body(p Pending, consoleBase string) ([]byte, error) {
	out := payload{
		Type:               EventPending,
		ApprovalID:         p.ApprovalID,
		Tool:               p.Tool,
		Tenant:             p.Tenant,
		Session:            p.Session,
		CanonicalArguments: p.CanonicalArguments,
		Rule:               p.Rule,
		Reason:             p.Reason,
		RequestedAt:        p.RequestedAt.UTC().Format(time.RFC3339),
		ExpiresAt:          p.ExpiresAt.UTC().Format(time.RFC3339),
		ConsoleURL:         ConsoleURL(consoleBase, p.ApprovalID),
	}
	if p.HasStep {
		out.Step = &p.Step
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("notify: approval %s: encode: %w", p.ApprovalID, err)
	}
	return b, nil
}

// ConsoleURL is the console page of approval id under base (the gateway's
// public admin URL): `<base>/console/approvals/<id>`, or "" without a base.
func ConsoleURL(base, id string) string {
	if base == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/console/approvals/" + url.PathEscape(id)
}
