package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/wire"
)

// denySeeds are the argument seeds verify tries when it looks for a call
// the decide rules deny: small and large numbers, different strings.
var denySeeds = []int{1, 2, 3, 10, 100, 1000, 10000, 1000000, 1000000000}

// checkDenied sends a call the tool's decide rules deny (as the rules
// themselves say, evaluated on verify's arguments) to the gateway with the
// rules, and counts that the stand-in never ran.
func checkDenied(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	policy := env.opts.Decisions[t.name]
	if policy.Rules() == 0 {
		return NA, t.name + " has no decide rules"
	}
	if env.opts.Mode == decide.ModeObserve {
		return NA, "mode is observe: denials are reported, not enforced"
	}
	if t.argsErr != nil {
		return NA, fmt.Sprintf("no arguments for %s: %v", t.name, t.argsErr)
	}
	c := toolCall{tool: t.name, session: env.session(), step: 1, decided: true}
	args, _ := argsDecided(ctx, env, t, c, decide.Deny)
	if args != nil {
		c.args = args
		resp, n, err := callCounting(ctx, env, t, c)
		switch {
		case err != nil:
			return Fail, err.Error()
		case n != 0:
			return Fail, fmt.Sprintf("a call its rules deny (%s) ran the tool (answered %d)", args, resp.status)
		case resp.status != http.StatusForbidden || problemCode(resp.body) != wire.CodeCallDenied:
			return Fail, fmt.Sprintf("a call its rules deny answered %d %s, not 403 %s", resp.status, resp.body, wire.CodeCallDenied)
		}
		return Pass, fmt.Sprintf("denied call (%s) refused with 403 %s, not run", args, wire.CodeCallDenied)
	}
	return NA, "none of the arguments verify made is denied by " + t.name + "'s decide rules"
}

// argsDecided finds arguments (and other arguments) the tool's own rules
// decide want for call c, as the rules themselves say; nil when none of
// verify's arguments are.
func argsDecided(ctx context.Context, env *scratchEnv, t *checkedTool, c toolCall, want decide.Decision) (args, other []byte) {
	tenant := ""
	if len(env.tenants) > 0 {
		tenant = env.tenants[c.tenant].name
	}
	policy := env.opts.Decisions[t.name]
	for _, seed := range denySeeds {
		args, other, err := argsFor(t.entry, seed+env.seed())
		if err != nil {
			continue
		}
		v, _ := policy.Decide(ctx, &decide.Input{Arguments: args, Tenant: tenant, Session: c.session, Step: c.step, HasStep: true, API: "rest"})
		if v.Decision == want {
			return args, other
		}
	}
	return nil, nil
}

// problemCode is the code member of a problem body ("" if none).
func problemCode(body []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Code
}
