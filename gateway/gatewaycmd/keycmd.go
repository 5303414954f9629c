package gatewaycmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/toolgateway/toolgateway/keyderive"
)

const keyUsage = "-session S -step N -tool T [-v] ['<json arguments>' | -]"

// maxKeyInput caps the arguments read for `gateway key`: far above any
// max_body_bytes a gateway would accept, low enough that a wrong pipe
// (a disk image on stdin) fails instead of eating the memory.
const maxKeyInput = 64 << 20

// runKey prints the idempotency key of one call, derived exactly as the
// gateway verifies it (keyderive): the JSON arguments come from the one
// positional argument, or from stdin when there is none or it is "-".
// With -v a second line holds the canonical arguments (RFC 8785), the
// bytes that were hashed after "session:step:tool:".
func runKey(_ context.Context, inv invocation) error {
	fs := flag.NewFlagSet("key", flag.ContinueOnError)
	session := fs.String("session", "", "Agent-Session-Id of the call (required)")
	step := fs.String("step", "", "Agent-Step-Index of the call, 0 to 2^53-1 (required)")
	tool := fs.String("tool", "", "tool name (required)")
	verbose := fs.Bool("v", false, "also print the canonical arguments on a second line")
	if err := parseFlags(fs, inv, "key", keyUsage); err != nil {
		return helpIsSuccess(err)
	}
	var missing []string
	for _, f := range []struct{ name, value string }{{"-session", *session}, {"-step", *step}, {"-tool", *tool}} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("key: %s required (usage: gateway key %s)", strings.Join(missing, ", "), keyUsage)
	}
	stepIndex, err := keyderive.ParseStepIndex(*step)
	if err != nil {
		return fmt.Errorf("key: -step: %w", err)
	}
	var args []byte
	switch {
	case fs.NArg() > 1:
		return fmt.Errorf("key: want one JSON argument, got %d (quote the JSON: '{\"a\":1}')", fs.NArg())
	case fs.NArg() == 1 && fs.Arg(0) != "-":
		args = []byte(fs.Arg(0))
	default:
		if args, err = io.ReadAll(io.LimitReader(inv.stdin, maxKeyInput+1)); err != nil {
			return fmt.Errorf("key: read stdin: %w", err)
		}
		if len(args) > maxKeyInput {
			return fmt.Errorf("key: stdin: more than %d bytes of arguments", maxKeyInput)
		}
	}
	key, canonical, err := keyderive.Derive(*session, stepIndex, *tool, args)
	switch {
	case errors.Is(err, keyderive.ErrInvalidJSON) && len(args) == 0:
		return errors.New("key: no arguments: give the JSON object as the argument or on stdin")
	case errors.Is(err, keyderive.ErrInvalidSession):
		return fmt.Errorf("key: -session: %w", err)
	case errors.Is(err, keyderive.ErrInvalidTool):
		return fmt.Errorf("key: -tool: %w", err)
	case err != nil:
		return fmt.Errorf("key: arguments: %w", err)
	}
	if _, err := fmt.Fprintln(inv.stdout, key); err != nil {
		return err
	}
	if *verbose {
		_, err = fmt.Fprintf(inv.stdout, "%s\n", canonical)
	}
	return err
}
