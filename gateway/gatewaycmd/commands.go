package gatewaycmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is one subcommand of the program: `gateway NAME flags...`.
type command struct {
	name    string
	summary string
	usage   string // the flags and arguments after the name
	run     func(ctx context.Context, inv invocation) error
}

// invocation is what a subcommand gets of the process.
type invocation struct {
	args   []string // after the subcommand's name
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
}

// commands lists the subcommands; anything else is the gateway serving.
var commands = []command{
	{"key", "print the idempotency key of a call", keyUsage, runKey},
	{"check", "validate a config and list the tools it would serve", checkUsage, runCheck},
	{"health", "probe a gateway's health endpoint (exit 0 when it answers 200)", healthUsage, runHealth},
	{"admin", "search, show, resolve and delete idempotency records through a gateway's admin API", adminUsage, runAdmin},
	{"migrate", "apply (or with -print show) this version's store schema or layout change", migrateUsage, runMigrate},
	{"verify", "run the gateway's guarantees against this config's tools (stand-in upstreams, scratch store)", verifyUsage, runVerify},
	{"scan", "classify every tool (read_only, consequential, unknown), say what protects it and the config it lacks", scanUsage, runScan},
	{"policy", "replay a config's decide rules against the calls the store holds: how many would have been allowed, held, denied", policyUsage, runPolicy},
	{"receipts", "export the receipts of the configured store as JSON lines, or verify every chain of an export (or of the store)", receiptsUsage, runReceipts},
}

// RunIO is the whole program. args[0] is the program name; when args[1] is
// a subcommand (key, check, health, admin, migrate, verify, ...) that subcommand runs and returns,
// otherwise the gateway serves: it loads the config, opens the store,
// serves until ctx ends, then drains the tools in flight and returns nil
// (logs go to stdout as JSON lines). stdin is read only by `key` without
// arguments. Errors are returned, never printed: MainWith prints them on
// stderr and exits 1, so stdout carries only results.
func RunIO(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) error {
	if len(args) > 1 {
		for _, c := range commands {
			if args[1] == c.name {
				return c.run(ctx, invocation{args: args[2:], getenv: getenv, stdin: stdin, stdout: stdout})
			}
		}
		if args[1] == "help" {
			printUsage(stdout, args[0])
			return nil
		}
	}
	return serve(ctx, args, getenv, stdout)
}

func printUsage(w io.Writer, program string) {
	fmt.Fprintf(w, "usage:\n  %s [-config FILE] [-version]    serve\n", program)
	for _, c := range commands {
		fmt.Fprintf(w, "  %s %s %s\n      %s\n", program, c.name, c.usage, c.summary)
	}
}

// parseFlags parses a subcommand's flags. Flag errors come back as one
// error that carries the usage (for stderr); -h prints the usage on stdout
// and reports errHelp, which the subcommand turns into exit status 0.
func parseFlags(fs *flag.FlagSet, inv invocation, name, usageLine string) error {
	var usage strings.Builder
	fs.SetOutput(&usage)
	err := fs.Parse(inv.args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(inv.stdout, "usage: gateway %s %s\n", name, usageLine)
		fs.SetOutput(inv.stdout)
		fs.PrintDefaults()
		return errHelp
	}
	if err != nil {
		return fmt.Errorf("%s: %w (usage: gateway %s %s)", name, err, name, usageLine)
	}
	return nil
}

// errHelp means -h was given and the usage printed: nothing else to do.
var errHelp = errors.New("help printed")

// helpIsSuccess turns errHelp into a nil error.
func helpIsSuccess(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}
