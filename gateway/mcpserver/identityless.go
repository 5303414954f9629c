package mcpserver

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway/notify"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// Identityless calls (contract section 21): ChatGPT, Claude Desktop and
// Claude.ai send a tools/call with no identity of ours and no call id of
// their own. For a tool whose mode is fingerprint, such a call is keyed
// on the signed-in person, the tool, the arguments and the dedupe window
// (callpath.FingerprintIdentity); with refuse it gets today's -32602.

// IdentitylessMode is what a tools/call without identity gets.
type IdentitylessMode string

// The modes of mcp.identityless and tools[].identityless.
const (
	// IdentitylessFingerprint keys the call on its fingerprint.
	IdentitylessFingerprint IdentitylessMode = "fingerprint"
	// IdentitylessRefuse refuses it: JSON-RPC -32602 agent_session_missing.
	IdentitylessRefuse IdentitylessMode = "refuse"
)

// DefaultDedupeWindow is mcp.dedupe_window's default: a day, long enough
// for "regenerate" the next morning, short enough that a call meant
// again tomorrow runs.
const DefaultDedupeWindow = 24 * time.Hour

// Validate refuses a mode that is not one of the two.
func (m IdentitylessMode) Validate() error {
	switch m {
	case IdentitylessFingerprint, IdentitylessRefuse:
		return nil
	}
	return fmt.Errorf("%q: want fingerprint or refuse", string(m))
}

// Identityless is one tool's handling of calls without identity.
type Identityless struct {
	// Mode is fingerprint or refuse ("" means refuse).
	Mode IdentitylessMode
	// Window is the dedupe window of fingerprint keys (0 means
	// DefaultDedupeWindow).
	Window time.Duration
}

// identitylessPolicies are the reloadable handling of calls without
// identity: the endpoint's default and each tool's own.
type identitylessPolicies struct {
	endpoint Identityless
	tools    map[string]Identityless
}

// Reloadable holds what of a mounted endpoint's Options a configuration
// reload may change: Identityless and ToolIdentityless (mcp.identityless,
// mcp.dedupe_window, tools[].identityless, tools[].dedupe_window). Pass
// one in Options.Reloadable and call Reload with the reloaded Options;
// the next tools/call uses them (one in flight keeps the key it got).
// The zero value is ready to use.
type Reloadable struct {
	policies atomic.Pointer[identitylessPolicies]
}

// Reload replaces the endpoint's handling of calls without identity by
// o's, in one atomic step.
func (r *Reloadable) Reload(o Options) {
	r.policies.Store(&identitylessPolicies{endpoint: o.Identityless, tools: maps.Clone(o.ToolIdentityless)})
}

// policy returns the handling of entry's calls without identity:
// the tool's own, else the endpoint's.
func (r *Reloadable) policy(entry *tools.Entry) Identityless {
	p := r.policies.Load()
	out := p.endpoint
	if own, ok := p.tools[entry.Spec.Name]; ok {
		if own.Mode != "" {
			out.Mode = own.Mode
		}
		if own.Window > 0 {
			out.Window = own.Window
		}
	}
	if out.Window <= 0 {
		out.Window = DefaultDedupeWindow
	}
	return out
}

// keyByFingerprint gives c, a mutating call that carried no identity, its
// fingerprint identity when its tool says fingerprint. A caller that is
// no person (a static token, which many people may share) is refused
// naming why: keyed on such a token, two people's identical calls would
// be one.
func (e *endpoint) keyByFingerprint(ctx context.Context, c *callpath.Call) {
	if !c.NoIdentity || c.Entry.Spec.ReadOnly {
		return
	}
	policy := e.reloadable.policy(c.Entry)
	if policy.Mode != IdentitylessFingerprint {
		return
	}
	who := callpath.PrincipalFrom(ctx)
	person := who.IsPerson()
	if !person && c.AllowUnkeyed {
		return // the operator chose to run such calls unprotected
	}
	if !person {
		c.IdentityProblem = callpath.NewProblem(wire.CodeAgentSessionMissing,
			"this call carries no identity and its token names no person (a static token stands for whoever holds it), so the gateway cannot key it on who asked: sign in through the identity provider, or send the agent session as _meta \""+wire.MetaSessionID+"\" and the step as \""+wire.MetaStepIndex+"\"")
		return
	}
	now := c.Received
	if now.IsZero() {
		now = time.Now()
	}
	c.Identity = callpath.FingerprintIdentity(who.ID, policy.Window, now)
	c.IdentityProblem, c.NoIdentity, c.AllowUnkeyed = nil, false, false
}

// render is mcpRender with what a person at a chat host needs to read:
// a fingerprint replay says so (the model would otherwise report the
// first call's result as a new one), and a call waiting for an approval
// says where to approve it.
func (e *endpoint) render(c *callpath.Call, res callpath.Result) (*mcp.CallToolResult, error) {
	out, err := mcpRender(c, res)
	if err != nil || out == nil {
		return out, err
	}
	switch {
	case res.Kind == callpath.ResultReplayed && c.Identity.FingerprintPrincipal != "":
		out.Content = append([]mcp.Content{&mcp.TextContent{Text: fingerprintReplayNote(res.ExecutionID)}}, out.Content...)
	case res.Problem != nil && res.Problem.Code == wire.CodeApprovalPending && res.Problem.ApprovalID != "":
		if len(out.Content) > 0 {
			if text, ok := out.Content[0].(*mcp.TextContent); ok {
				text.Text += " " + e.whereToApprove(res.Problem.ApprovalID)
			}
		}
	}
	return out, nil
}

// fingerprintReplayNote is the first text of a fingerprint replay: that
// this exact call already ran, when (the time in its execution id, a
// ULID minted when the first call was claimed), and that its result
// follows. The rest of the result is the first answer, unchanged.
func fingerprintReplayNote(executionID string) string {
	when := "earlier"
	if id, err := ulid.ParseStrict(executionID); err == nil {
		when = "at " + ulid.Time(id.Time()).UTC().Format(time.RFC3339)
	}
	return "This exact call (same tool, same arguments, by the same person) already ran " + when +
		" (execution " + executionID + ") and was not run again; its result was:"
}

// whereToApprove tells the person where the approval waits: the console's
// page of it.
func (e *endpoint) whereToApprove(approvalID string) string {
	link := notify.ConsoleURL(e.opts.ConsoleBaseURL, approvalID)
	if link == "" {
		link = "/console/approvals/" + url.PathEscape(approvalID) + " on the gateway"
	}
	return "A person with the right to approve it can do so in the gateway's console: " + link +
		". Once approved, making the same call again (for instance when the user says \"go on\") runs it, once."
}
