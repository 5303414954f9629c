package gatewaycmd

import (
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/toolgateway/toolgateway/tools"
)

const verifyUsage = "-config FILE [-json] [-junit FILE] [-store scratch|configured] [-mcp-list]"

// VerifyResult is one guarantee checked on one tool.
type VerifyResult struct {
	Tool      string `json:"tool"`
	Guarantee string `json:"guarantee"`
	// Verdict is PASS, FAIL or N/A.
	Verdict string `json:"verdict"`
	// Detail says what happened, or for N/A why it does not apply.
	Detail string `json:"detail"`
}

// ExitStatus is an error that asks for a process exit status other than 1:
// [MainWith] exits with Code (`gateway verify` exits 2 when no guarantee
// applied).
type ExitStatus struct {
	Code int
	Err  error
}

// Error is the wrapped error's message.
func (e *ExitStatus) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *ExitStatus) Unwrap() error { return e.Err }

// errNoneApplied is `gateway verify`'s exit status 2.
var errNoneApplied = &ExitStatus{Code: 2, Err: errors.New("verify: no guarantee applies to this config")}

// verifyRun is how `gateway verify` runs, from its flags.
type verifyRun struct {
	// storeMode is -store: verifyStoreScratch or verifyStoreConfigured.
	storeMode string
	// mcpList is -mcp-list: list the tools of the MCP servers (tools/list
	// only) and verify them too.
	mcpList bool
	// wrap, when set, is put around the scratch store (tests).
	wrap wrapStore
}

// verifyConfig loads the config at path as `gateway check` does (the same
// errors) and runs every guarantee on every tool against stand-ins, on the
// scratch space run.storeMode names. Everything the run wrote is removed
// afterwards: an error doing so comes with the results.
func verifyConfig(ctx context.Context, path string, getenv func(string) string, run verifyRun) ([]VerifyResult, error) {
	st, err := prepare(path, getenv, io.Discard, true)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err) // check's message: the same prepare
	}
	if st.mcp != nil {
		defer st.mcp.Close()
	}
	if run.mcpList {
		if err := listMCPTools(ctx, st); err != nil {
			return nil, err
		}
	}
	space, err := newScratchSpace(ctx, st.cfg, st.store, run.storeMode)
	if err != nil {
		return nil, err
	}
	results, err := verifyIn(ctx, st, space, run)
	removeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scratchRemoveTimeout)
	defer cancel()
	if removeErr := space.remove(removeCtx); removeErr != nil {
		err = errors.Join(err, removeErr)
	}
	return results, err
}

// verifyIn runs the guarantees on the scratch space and closes its stores.
func verifyIn(ctx context.Context, st *startup, space *scratchSpace, run verifyRun) ([]VerifyResult, error) {
	env, err := newVerifyEnv(ctx, st, space, run.wrap)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	gatewayDefaults := tools.Policy{Timeout: st.opts.ToolTimeout, ReplayTTL: st.opts.ReplayTTL}
	var verifyTools []*verifyTool
	var recording *verifyTool // a tool the store guarantee can call
	for _, e := range env.opts.Tools.Entries() {
		t := &verifyTool{name: e.Spec.Name, spec: e.Spec, entry: e, standIn: env.standIn[e.Spec.Name],
			policy: st.opts.Policies[e.Spec.Name].Resolve(e.Spec.Policy, gatewayDefaults)}
		_, _, t.argsErr = argsFor(e, 1)
		verifyTools = append(verifyTools, t)
		if _, ok := needsRecords(t); ok && recording == nil {
			recording = t
		}
	}
	if err := probeWrites(ctx, env, space.desc, recording); err != nil {
		return nil, err
	}
	var results []VerifyResult
	for _, t := range verifyTools {
		for _, g := range guarantees {
			results = append(results, runGuarantee(ctx, env, t, g))
		}
	}
	results = append(results, checkNewerLayout(ctx, env, space, recording))
	return append(results, mcpServerResults(st, run.mcpList)...), nil
}

// runGuarantee checks g on t. A guarantee during which a call was
// answered 503 (the store did not take it) proved nothing: N/A, saying
// so with the store's message. A FAIL says how many times the tool's
// stand-in ran during the check.
func runGuarantee(ctx context.Context, env *verifyEnv, t *verifyTool, g guarantee) VerifyResult {
	mark, runsBefore := env.refused.mark(), t.standIn.runs.Load()
	verdict, detail := g.check(ctx, env, t)
	if why := env.refused.since(mark); why != "" {
		verdict, detail = verifyNA, why
	}
	if verdict == verifyFail {
		detail += fmt.Sprintf(" [%s's stand-in ran %d times during this check]", t.name, t.standIn.runs.Load()-runsBefore)
	}
	return VerifyResult{Tool: t.name, Guarantee: g.name, Verdict: verdict, Detail: detail}
}

// argsFor makes two argument sets for e's schema and has the gateway's own
// validation confirm them: arguments it would refuse prove nothing.
func argsFor(e *tools.Entry, seed int) (args, other []byte, err error) {
	if args, err = verifyArgs(e.Spec.InputSchema, seed); err != nil {
		return nil, nil, err
	}
	if other, err = verifyArgs(e.Spec.InputSchema, seed+1); err != nil {
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

// verifyExit is the error for results: nil when every applicable guarantee
// passed, exit 2 when none applied, exit 1 naming the failures otherwise.
func verifyExit(results []VerifyResult) error {
	applied, failed := 0, 0
	for _, r := range results {
		switch r.Verdict {
		case verifyFail:
			failed++
			applied++
		case verifyPass:
			applied++
		}
	}
	switch {
	case failed > 0:
		return fmt.Errorf("verify: %d of %d applicable guarantees FAILED", failed, applied)
	case applied == 0:
		return errNoneApplied
	}
	return nil
}

// runVerify is `gateway verify`.
func runVerify(ctx context.Context, inv invocation) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	configPath := fs.String("config", "", "path to the config file (required)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	junit := fs.String("junit", "", "also write the results as JUnit XML to this file")
	mcpList := fs.Bool("mcp-list", false, "list the tools of mcp_servers (tools/list only, never tools/call) and verify them on stand-ins too")
	storeMode := fs.String("store", verifyStoreScratch, "where the guarantees run: scratch, a fresh embedded store in a temporary directory; configured, a scratch prefix, schema or file of the configured store, removed afterwards")
	if err := parseFlags(fs, inv, "verify", verifyUsage); err != nil {
		return helpIsSuccess(err)
	}
	if *configPath == "" {
		return fmt.Errorf("verify: -config is required (usage: gateway verify %s)", verifyUsage)
	}
	if *storeMode != verifyStoreScratch && *storeMode != verifyStoreConfigured {
		return fmt.Errorf("verify: -store %q: want %s (a fresh embedded store) or %s (a scratch part of the configured store)", *storeMode, verifyStoreScratch, verifyStoreConfigured)
	}
	results, err := verifyConfig(ctx, *configPath, inv.getenv, verifyRun{storeMode: *storeMode, mcpList: *mcpList})
	if err != nil && results == nil {
		return err
	}
	if printErr := printVerify(inv, results, *asJSON, *junit); printErr != nil {
		return printErr
	}
	if err != nil { // the results stand; the scratch space was not removed
		return err
	}
	return verifyExit(results)
}

// printVerify writes the results to stdout (as text or JSON) and, when
// junit is set, as JUnit XML to that file.
func printVerify(inv invocation, results []VerifyResult, asJSON bool, junit string) error {
	if asJSON {
		if err := writeIndented(inv.stdout, results); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(inv.stdout, 0, 4, 2, ' ', 0)
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Verdict, r.Tool, r.Guarantee, r.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if junit != "" {
		return writeJUnit(junit, results)
	}
	return nil
}

// junitSuite is the JUnit XML CI systems read: one testcase per guarantee
// per tool, N/A as skipped.
type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	ClassName string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
}

func writeJUnit(path string, results []VerifyResult) error {
	suite := junitSuite{Name: "gateway verify", Tests: len(results)}
	for _, r := range results {
		c := junitCase{ClassName: r.Tool, Name: r.Guarantee}
		switch r.Verdict {
		case verifyFail:
			c.Failure = &junitMessage{Message: r.Detail}
			suite.Failures++
		case verifyNA:
			c.Skipped = &junitMessage{Message: r.Detail}
			suite.Skipped++
		}
		suite.Cases = append(suite.Cases, c)
	}
	out, err := xml.MarshalIndent(suite, "", "  ")
	if err != nil {
		return fmt.Errorf("verify: junit: %w", err)
	}
	if err := os.WriteFile(path, append([]byte(xml.Header), append(out, '\n')...), 0o644); err != nil {
		return fmt.Errorf("verify: junit: %w", err)
	}
	return nil
}
