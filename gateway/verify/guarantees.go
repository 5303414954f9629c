package verify

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// checkedTool is what the guarantees know of one configured tool.
type checkedTool struct {
	name   string
	spec   tools.Spec
	policy tools.Policy
	entry  *tools.Entry
	// argsErr says why verify cannot make arguments for the tool.
	argsErr error
	standIn *standIn
}

// guarantee is one promise of the gateway, checked on one tool: it returns
// the verdict and what happened (or, for N/A, why it does not apply).
type guarantee struct {
	name  string
	check func(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string)
}

// guarantees are the checks verify runs, in the order it prints them.
var guarantees = []guarantee{
	{"replay runs once", checkReplay},
	{"racing identical calls run once", checkRacing},
	{"reused key with other arguments is refused", checkReusedKey},
	{"step guard refuses a changed step", checkStepGuard},
	{"uncertain outcome is not rerun", checkUncertain},
	{"tenants never see each other's records", checkTenants},
	{"effect key runs once across steps and sessions", checkEffectKeyOnce},
	{"denied call never runs", checkDenied},
	{"approval never lets other arguments run", checkApprovalOtherArgs},
	{"approval is used once", checkApprovalUsedOnce},
	{"approval expires", checkApprovalExpires},
	{"altered receipt is detected", checkReceiptAltered},
	{"reconciliation completes a record it is told committed", checkReconcile},
}

// Guarantees are the names of the guarantees checked on each tool, in the
// order Run reports them (the store's LayoutGuarantee comes after them).
func Guarantees() []string {
	names := make([]string, len(guarantees))
	for i, g := range guarantees {
		names[i] = g.name
	}
	return names
}

// needsRecords is the N/A every stored-record guarantee gives a read-only
// tool, or one whose arguments verify cannot make.
func needsRecords(t *checkedTool) (string, bool) {
	if t.spec.ReadOnly {
		return t.name + " is read_only (nothing is stored, every call runs)", false
	}
	if t.argsErr != nil {
		return fmt.Sprintf("no arguments for %s: %v", t.name, t.argsErr), false
	}
	return "", true
}

// freshArgs are two different valid argument sets no other call of this
// run used (an effect key made of them is new too), that the tool's decide
// rules allow (allowedArgs). An error makes the guarantee N/A: it says
// why verify made no call.
func (t *checkedTool) freshArgs(ctx context.Context, env *scratchEnv) (args, other []byte, err error) {
	return allowedArgs(ctx, env, t)
}

// ran counts the stand-in's executions during do.
func ran(t *checkedTool, do func() error) (int64, error) {
	before := t.standIn.runs.Load()
	err := do()
	return t.standIn.runs.Load() - before, err
}

// callCounting makes call c through env and answers the response and how
// many times it ran t's stand-in.
func callCounting(ctx context.Context, env *scratchEnv, t *checkedTool, c toolCall) (answer, int64, error) {
	var resp answer
	n, err := ran(t, func() (err error) { resp, err = env.call(ctx, c); return err })
	return resp, n, err
}

// callWithArgs makes call c again with args in place of its own (the
// same tool, session and step), counting the tool's executions.
func callWithArgs(ctx context.Context, env *scratchEnv, t *checkedTool, c toolCall, args []byte) (answer, int64, error) {
	c.args = args
	return callCounting(ctx, env, t, c)
}

// firstCall is a call of t with fresh arguments at step 1 of a new
// session; not ok (and why) when t keeps no records or has no arguments
// to make.
func firstCall(ctx context.Context, env *scratchEnv, t *checkedTool) (c toolCall, why string, ok bool) {
	if why, ok := needsRecords(t); !ok {
		return toolCall{}, why, false
	}
	args, _, err := t.freshArgs(ctx, env)
	if err != nil {
		return toolCall{}, err.Error(), false
	}
	return toolCall{tool: t.name, session: env.session(), step: 1, args: args}, "", true
}

// callTwice sends a and then b, counting the tool's executions meanwhile.
func callTwice(ctx context.Context, env *scratchEnv, t *checkedTool, a, b toolCall) (ra, rb answer, n int64, err error) {
	n, err = ran(t, func() (err error) {
		if ra, err = env.call(ctx, a); err != nil {
			return err
		}
		rb, err = env.call(ctx, b)
		return err
	})
	return ra, rb, n, err
}

// ranOnce judges the first of two calls (callTwice): ok when it answered
// 200 and the tool ran once in all, else the verdict and its detail; what
// names the two calls for a tool that ran more than once.
func ranOnce(first answer, n int64, err error, what string) (verdict, detail string, ok bool) {
	switch {
	case err != nil:
		return Fail, err.Error(), false
	case n == 0 && first.status != http.StatusOK:
		return NA, "not exercised: the gateway refused the call (" + first.summary() + ")", false
	case first.status != http.StatusOK:
		return Fail, fmt.Sprintf("first call answered %d: %s", first.status, first.body), false
	case n != 1:
		return Fail, fmt.Sprintf("%s ran the tool %d times", what, n), false
	}
	return "", "", true
}

func checkReplay(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	c, why, ok := firstCall(ctx, env, t)
	if !ok {
		return NA, why
	}
	first, second, n, err := callTwice(ctx, env, t, c, c)
	if verdict, detail, ok := ranOnce(first, n, err, "two identical calls"); !ok {
		return verdict, detail
	}
	if second.status != first.status || !bytes.Equal(second.body, first.body) {
		return Fail, fmt.Sprintf("the replay answered %d %s, not the first answer", second.status, second.body)
	}
	return Pass, "2 identical calls, 1 execution, same answer"
}

func checkRacing(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	const racers = 8
	c, why, ok := firstCall(ctx, env, t)
	if !ok {
		return NA, why
	}
	answers, n, err := raceCalls(ctx, env, t, c, racers)
	if err != nil {
		return Fail, err.Error()
	}
	var refused *answer
	for _, resp := range answers {
		if resp.status != http.StatusOK {
			refused = &resp
		}
	}
	switch {
	case n == 0 && refused != nil:
		// Nothing ran because the gateway refused the call: that says
		// nothing about racing calls (a refusal is not an execution).
		return NA, "not exercised: the gateway refused the call (" + refused.summary() + ")"
	case n != 1:
		return Fail, fmt.Sprintf("%d racing identical calls ran the tool %d times", racers, n)
	}
	return Pass, fmt.Sprintf("%d racing identical calls, 1 execution", racers)
}

// raceCalls sends racers copies of call c at once and answers what they
// were answered, how many times t's stand-in ran meanwhile, and the
// first error of those that got no answer.
func raceCalls(ctx context.Context, env *scratchEnv, t *checkedTool, c toolCall, racers int) (answers []answer, runs int64, err error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	runs, _ = ran(t, func() error {
		for range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, callErr := env.call(ctx, c)
				mu.Lock()
				defer mu.Unlock()
				if callErr != nil {
					err = cmp.Or(err, callErr)
					return
				}
				answers = append(answers, resp)
			}()
		}
		wg.Wait()
		return nil
	})
	return answers, runs, err
}

func checkReusedKey(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	if why, ok := needsRecords(t); !ok {
		return NA, why
	}
	args, other, err := t.freshArgs(ctx, env)
	if err != nil {
		return NA, err.Error()
	}
	if bytes.Equal(args, other) {
		return NA, t.name + "'s schema admits only one argument value"
	}
	first := toolCall{tool: t.name, session: env.session(), step: 1, args: args}
	if _, err := env.call(ctx, first); err != nil {
		return Fail, err.Error()
	}
	key, _ := deriveKey(first)
	reused := first
	reused.args, reused.key, reused.step = other, key, 2
	resp, n, err := callCounting(ctx, env, t, reused)
	switch {
	case err != nil:
		return Fail, err.Error()
	case n != 0:
		return Fail, fmt.Sprintf("the reused key with other arguments ran the tool (answered %d)", resp.status)
	case resp.status < 400:
		return Fail, fmt.Sprintf("the reused key with other arguments answered %d", resp.status)
	}
	return Pass, fmt.Sprintf("refused with %d, not run", resp.status)
}

func checkStepGuard(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	if why, ok := needsRecords(t); !ok {
		return NA, why
	}
	args, other, err := t.freshArgs(ctx, env)
	if err != nil {
		return NA, err.Error()
	}
	if env.opts.StepGuardOff {
		return NA, "idempotency.step_guard is off"
	}
	if bytes.Equal(args, other) {
		return NA, t.name + "'s schema admits only one argument value"
	}
	c := toolCall{tool: t.name, session: env.session(), step: 1, args: args}
	if _, err := env.call(ctx, c); err != nil {
		return Fail, err.Error()
	}
	resp, n, err := callWithArgs(ctx, env, t, c, other)
	switch {
	case err != nil:
		return Fail, err.Error()
	case n != 0:
		return Fail, fmt.Sprintf("a changed call at the same step ran the tool (answered %d)", resp.status)
	case resp.status != http.StatusUnprocessableEntity:
		return Fail, fmt.Sprintf("a changed call at the same step answered %d, not 422", resp.status)
	}
	return Pass, "changed call at the same step refused with 422, not run"
}

func checkUncertain(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	if why, ok := needsRecords(t); !ok {
		return NA, why
	}
	args, _, err := t.freshArgs(ctx, env)
	if err != nil {
		return NA, err.Error()
	}
	if t.policy.LeaseExpiry != tools.LeaseExpiryUnknown {
		return NA, t.name + " has lease_expiry: " + string(t.policy.LeaseExpiry) + ", not unknown"
	}
	c := toolCall{tool: t.name, session: env.session(), step: 1, args: args}
	t.standIn.uncertain.Store(true)
	first, err := env.call(ctx, c)
	t.standIn.uncertain.Store(false)
	if err != nil {
		return Fail, err.Error()
	}
	var retry answer
	n, err := ran(t, func() (err error) { retry, err = env.call(ctx, c); return err })
	switch {
	case err != nil:
		return Fail, err.Error()
	case n != 0:
		return Fail, fmt.Sprintf("after an uncertain outcome (answered %d) the retry ran the tool again (answered %d)", first.status, retry.status)
	case retry.status < 400:
		return Fail, fmt.Sprintf("the retry after an uncertain outcome answered %d", retry.status)
	}
	return Pass, fmt.Sprintf("retry after an uncertain outcome answered %d, not run", retry.status)
}

func checkTenants(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	if why, ok := needsRecords(t); !ok {
		return NA, why
	}
	args, _, err := t.freshArgs(ctx, env)
	if err != nil {
		return NA, err.Error()
	}
	if len(env.tenants) < 2 {
		return NA, "fewer than 2 tenants configured"
	}
	c := toolCall{tool: t.name, session: env.session(), step: 1, args: args}
	mine, err := env.call(ctx, c)
	if err != nil {
		return Fail, err.Error()
	}
	if mine.status != http.StatusOK {
		return NA, fmt.Sprintf("not exercised: %s's call was refused (%s)", env.tenants[0].name, mine.summary())
	}
	c.tenant = 1
	var theirs answer
	n, err := ran(t, func() (err error) { theirs, err = env.call(ctx, c); return err })
	switch {
	case err != nil:
		return Fail, err.Error()
	case n == 0 && theirs.status != http.StatusOK:
		return NA, fmt.Sprintf("not exercised: %s's call was refused (%s)", env.tenants[1].name, theirs.summary())
	case n != 1 || bytes.Equal(mine.body, theirs.body):
		return Fail, fmt.Sprintf("%s's identical call got %s's record (%d executions)", env.tenants[1].name, env.tenants[0].name, n)
	}
	return Pass, fmt.Sprintf("the same call as %s ran on its own for %s", env.tenants[0].name, env.tenants[1].name)
}

// checkEffectKeyOnce sends the same arguments under two sessions and steps
// (two keys, one effect key): the tool runs once, the second is a replay.
func checkEffectKeyOnce(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	if why, ok := needsRecords(t); !ok {
		return NA, why
	}
	if t.policy.EffectKey == "" {
		return NA, t.name + " has no effect_key"
	}
	args, _, err := t.freshArgs(ctx, env)
	if err != nil {
		return NA, err.Error()
	}
	first := toolCall{tool: t.name, session: env.session(), step: 1, args: args}
	again := toolCall{tool: t.name, session: env.session(), step: 7, args: args}
	r1, r2, n, err := callTwice(ctx, env, t, first, again)
	if verdict, detail, ok := ranOnce(r1, n, err, "the same effect in another session and step"); !ok {
		return verdict, detail
	}
	if r2.header.Get(wire.HeaderEffectKeyReplayed) != "true" {
		return Fail, fmt.Sprintf("the same effect in another session answered %d without %s: true", r2.status, wire.HeaderEffectKeyReplayed)
	}
	return Pass, "2 sessions, 2 steps, 1 execution, the second a replay"
}
