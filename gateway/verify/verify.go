// Package verify is the harness behind `gateway verify` (docs/verify.md):
// it builds a scratch gateway from a checked config, with stand-ins for
// the tools and a scratch store, checks each of the gateway's guarantees
// on each tool against it, and reports PASS, FAIL or N/A for each, as
// text, JSON or JUnit XML, with the exit status they call for.
//
// It knows nothing of the config file or the command line: what it needs
// from the program comes in a [Program].
package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/reconcile"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// Program is what a verify run takes from the program that checked the
// config: the gateway's options, the scratch store and how to reach the
// stand-ins of MCP servers. The program fills it; Run changes none of it.
type Program struct {
	// Options are the checked config's gateway options: the tools (the
	// tools MCP servers listed among them), their policies, decide rules
	// and mode, tenants, approvals, the key mode and step guard. The
	// scratch gateways take them with the stand-ins and the scratch store
	// in the place of the tools and the store, and without OIDC, rate
	// limits, notifications, mounts or tracing.
	Options callpath.Options
	// Reconcile are the config's reconcile targets; a tool with one gets
	// the reconciliation guarantee, its endpoint replaced by a stand-in.
	Reconcile []reconcile.Target
	// Scratch is where the run keeps its records.
	Scratch Scratch
	// MCPServers are the config's mcp_servers, in config order.
	MCPServers []MCPServer
	// MCPListed is true when the MCP servers were asked to list their
	// tools (-mcp-list): the tools they listed are in Options.Tools and
	// get verified on stand-in MCP servers.
	MCPListed bool
	// MCPListWait is how long the listing waited for a server, named in
	// the line of one that did not list in time.
	MCPListWait time.Duration
	// ConnectMCP builds the gateway's MCP upstream code from the config's
	// mcp_servers with each server's address replaced by urls[name] (the
	// servers not in urls left out, no command run, no header sent),
	// registers their tools in registry and starts it, bounded by
	// MCPListWait. The manager comes back with the error when it was
	// built; Run closes it. Unused when no server listed a tool.
	ConnectMCP func(ctx context.Context, registry *tools.Registry, urls map[string]string) (*mcptool.Manager, error)
	// WrapStore, when set, is put around the scratch store (tests: a
	// deliberately broken store, or one that looks at it before it closes).
	WrapStore func(idempotency.Store) idempotency.Store
}

// Scratch is the part of a store one run keeps its records in, empty at
// the start, and a second one the layout guarantee marks as a newer
// gateway would leave it. The program makes both and removes them after
// Run.
type Scratch struct {
	// Name names the scratch store in messages (never a password).
	Name string
	// Kind is the store's kind (embedded, redis, redis-cluster, postgres),
	// named in the layout guarantee's line.
	Kind string
	// Open opens the scratch store, its layout set up.
	Open func(ctx context.Context) (idempotency.Store, error)
	// Receipts is the receipts store beside store as start-up keeps it:
	// nil when the config turns receipts off.
	Receipts func(ctx context.Context, store idempotency.Store) (receipts.Store, error)
	// MarkNewerLayout sets the layout up in the second scratch store and
	// then records there the layout version after the newest this gateway
	// knows, where the store's kind keeps it.
	MarkNewerLayout func(ctx context.Context) error
	// OpenNewer opens the second scratch store as start-up would, without
	// migrating it: an error wrapping idempotency.ErrNewerLayout when it
	// refuses at open.
	OpenNewer func(ctx context.Context) (idempotency.Store, error)
}

// MCPServer is one of the config's mcp_servers.
type MCPServer struct {
	// Name is the entry's name.
	Name string
	// Prefix is put before the names of the tools it lists.
	Prefix string
	// NotReady is true when it was asked to list its tools and did not
	// within MCPListWait.
	NotReady bool
}

// Result is one guarantee checked on one tool.
type Result struct {
	Tool      string `json:"tool"`
	Guarantee string `json:"guarantee"`
	// Verdict is PASS, FAIL or N/A.
	Verdict string `json:"verdict"`
	// Detail says what happened, or for N/A why it does not apply.
	Detail string `json:"detail"`
}

// Verdicts of one guarantee on one tool.
const (
	Pass = "PASS"
	Fail = "FAIL"
	NA   = "N/A"
)

// ErrNoneApplied is Status's error when no guarantee applied: `gateway
// verify` exits 2 with it.
var ErrNoneApplied = errors.New("verify: no guarantee applies to this config")

// Run checks every guarantee on every tool of p against stand-ins, on p's
// scratch store, and closes what it opened. Removing the scratch store's
// contents is the program's, afterwards.
func Run(ctx context.Context, p Program) ([]Result, error) {
	env, err := newScratchEnv(ctx, p)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	gatewayDefaults := tools.Policy{Timeout: p.Options.ToolTimeout, ReplayTTL: p.Options.ReplayTTL}
	var checked []*checkedTool
	var recording *checkedTool // a tool the store guarantee can call
	for _, e := range env.opts.Tools.Entries() {
		t := &checkedTool{name: e.Spec.Name, spec: e.Spec, entry: e, standIn: env.standIn[e.Spec.Name],
			policy: p.Options.Policies[e.Spec.Name].Resolve(e.Spec.Policy, gatewayDefaults)}
		_, _, t.argsErr = argsFor(e, 1)
		checked = append(checked, t)
		if _, ok := needsRecords(t); ok && recording == nil {
			recording = t
		}
	}
	if err := probeWrites(ctx, env, p.Scratch.Name, recording); err != nil {
		return nil, err
	}
	var results []Result
	for _, t := range checked {
		for _, g := range guarantees {
			results = append(results, runGuarantee(ctx, env, t, g))
		}
	}
	results = append(results, checkNewerLayout(ctx, env, p.Scratch, recording))
	return append(results, mcpServerResults(p)...), nil
}

// runGuarantee checks g on t. A guarantee during which a call was
// answered 503 (the store did not take it) proved nothing: N/A, saying
// so with the store's message. A FAIL says how many times the tool's
// stand-in ran during the check.
func runGuarantee(ctx context.Context, env *scratchEnv, t *checkedTool, g guarantee) Result {
	mark, runsBefore := env.refused.mark(), t.standIn.runs.Load()
	verdict, detail := g.check(ctx, env, t)
	if why := env.refused.since(mark); why != "" {
		verdict, detail = NA, why
	}
	if verdict == Fail {
		detail += fmt.Sprintf(" [%s's stand-in ran %d times during this check]", t.name, t.standIn.runs.Load()-runsBefore)
	}
	return Result{Tool: t.name, Guarantee: g.name, Verdict: verdict, Detail: detail}
}

// argsFor makes two argument sets for e's schema and has the gateway's own
// validation confirm them: arguments it would refuse prove nothing.
func argsFor(e *tools.Entry, seed int) (args, other []byte, err error) {
	if args, err = makeArgs(e.Spec.InputSchema, seed); err != nil {
		return nil, nil, err
	}
	if other, err = makeArgs(e.Spec.InputSchema, seed+1); err != nil {
		return nil, nil, err
	}
	for _, a := range [][]byte{args, other} {
		violations, err := e.Schema().ValidateJSON(a)
		if err != nil {
			return nil, nil, err
		}
		if len(violations) > 0 {
			return nil, nil, fmt.Errorf("the arguments verify made (%s) do not satisfy its input schema at %q: %s", a, violations[0].Location, violations[0].Message)
		}
	}
	return args, other, nil
}

// Status is the error results call for: nil when every applicable
// guarantee passed (exit 0), ErrNoneApplied when none applied (exit 2),
// an error naming the failures otherwise (exit 1).
func Status(results []Result) error {
	applied, failed := 0, 0
	for _, r := range results {
		switch r.Verdict {
		case Fail:
			failed++
			applied++
		case Pass:
			applied++
		}
	}
	switch {
	case failed > 0:
		return fmt.Errorf("verify: %d of %d applicable guarantees FAILED", failed, applied)
	case applied == 0:
		return ErrNoneApplied
	}
	return nil
}
