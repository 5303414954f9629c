// Command gateway is the tool-execution gateway for AI agents: it runs each
// mutating tool call exactly once per idempotency key, however often an
// agent replays it. See README.md and docs/.
package main

import (
	"context"
	"io"

	"github.com/toolgateway/toolgateway/gateway/gatewaycmd"

	// The bundled example tools (echo, provision-infra, lookup-resource).
	_ "github.com/toolgateway/toolgateway/tools/builtin"
)

func main() {
	gatewaycmd.MainWith(run)
}

// run is the program without the process: tests call it with their own
// arguments, environment, input and output. Besides serving, it runs the
// subcommands key, check and health (gateway help lists them).
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) error {
	return gatewaycmd.RunIO(ctx, args, getenv, stdin, stdout)
}
