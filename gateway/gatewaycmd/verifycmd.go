package gatewaycmd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/verify"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

const verifyUsage = "-config FILE [-json] [-junit FILE] [-store scratch|configured] [-mcp-list]"

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

// verifyRun is how `gateway verify` runs, from its flags.
type verifyRun struct {
	// storeMode is -store: verifyStoreScratch or verifyStoreConfigured.
	storeMode string
	// mcpList is -mcp-list: list the tools of the MCP servers (tools/list
	// only) and verify them too.
	mcpList bool
	// wrap, when set, is put around the scratch store (tests).
	wrap func(idempotency.Store) idempotency.Store
}

// verifyConfig loads the config at path as `gateway check` does (the same
// errors) and runs every guarantee on every tool against stand-ins, on the
// scratch space run.storeMode names. Everything the run wrote is removed
// afterwards: an error doing so comes with the results.
func verifyConfig(ctx context.Context, path string, getenv func(string) string, run verifyRun) ([]verify.Result, error) {
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
	results, err := verify.Run(ctx, verifyProgram(st, space, run))
	removeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scratchRemoveTimeout)
	defer cancel()
	if removeErr := space.remove(removeCtx); removeErr != nil {
		err = errors.Join(err, removeErr)
	}
	return results, err
}

// verifyProgram is what the verify harness takes from the checked config
// st: its options and reconcile targets, the scratch space, and the
// mcp_servers as -mcp-list left them.
func verifyProgram(st *startup, space *scratchSpace, run verifyRun) verify.Program {
	notReady := map[string]bool{}
	if run.mcpList && st.mcp != nil {
		for _, name := range st.mcp.NotReady() {
			notReady[name] = true
		}
	}
	var servers []verify.MCPServer
	for _, e := range st.cfg.MCPServers {
		servers = append(servers, verify.MCPServer{Name: e.Name, Prefix: e.Prefix, NotReady: notReady[e.Name]})
	}
	return verify.Program{
		Options:     st.opts,
		Reconcile:   st.reconcile,
		Scratch:     space.scratch(),
		MCPServers:  servers,
		MCPListed:   run.mcpList,
		MCPListWait: mcpStartWait,
		ConnectMCP: func(ctx context.Context, registry *tools.Registry, urls map[string]string) (*mcptool.Manager, error) {
			return connectMCPStandIns(ctx, st.cfg, registry, urls)
		},
		WrapStore: run.wrap,
	}
}

// connectMCPStandIns builds the MCP upstream code from cfg's mcp_servers
// with only each server's address changed, to urls[name] (the others left
// out), registers their tools in registry and starts it, as start-up would.
func connectMCPStandIns(ctx context.Context, cfg *Config, registry *tools.Registry, urls map[string]string) (*mcptool.Manager, error) {
	standIns := *cfg
	standIns.MCPServers = nil
	for _, e := range cfg.MCPServers {
		url, ok := urls[e.Name]
		if !ok {
			continue
		}
		e.URL, e.Command, e.Headers = url, nil, nil
		standIns.MCPServers = append(standIns.MCPServers, e)
	}
	log := slog.New(slog.DiscardHandler)
	manager, err := standIns.buildMCP(registry, log, func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	return manager, startMCP(ctx, manager, log)
}

// listMCPTools is -mcp-list: it connects to every MCP server as start-up
// does (a command server is started) and lists its tools, bounded by
// mcpStartWait, then stops listening to them. The tools listed are in
// st.opts.Tools with their names, input schemas and policies, where
// verify replaces them by stand-ins like every other tool: no tools/call
// ever reaches a server.
func listMCPTools(ctx context.Context, st *startup) error {
	if st.mcp == nil {
		return nil
	}
	err := startMCP(ctx, st.mcp, st.log)
	_ = st.mcp.Close() // no relisting, no session left open while verify runs
	if err != nil {
		return fmt.Errorf("verify: -mcp-list: %w", err)
	}
	return nil
}

// verifyExit is the error for results: nil when every applicable guarantee
// passed, exit 2 when none applied, exit 1 naming the failures otherwise.
func verifyExit(results []verify.Result) error {
	err := verify.Status(results)
	if errors.Is(err, verify.ErrNoneApplied) {
		return &ExitStatus{Code: 2, Err: err}
	}
	return err
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
func printVerify(inv invocation, results []verify.Result, asJSON bool, junit string) error {
	var err error
	if asJSON {
		err = writeIndented(inv.stdout, results)
	} else {
		err = verify.WriteText(inv.stdout, results)
	}
	if err != nil || junit == "" {
		return err
	}
	var xml bytes.Buffer
	if err := verify.WriteJUnit(&xml, results); err != nil {
		return err
	}
	if err := os.WriteFile(junit, xml.Bytes(), 0o644); err != nil {
		return fmt.Errorf("verify: junit: %w", err)
	}
	return nil
}
