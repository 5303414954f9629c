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
// arguments, environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return gatewaycmd.Run(ctx, args, getenv, stdout)
}
