package benchtool

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RoundTrips is a go-redis hook counting round trips: each command sent on
// its own and each pipeline is one. Add it to the gateway's store client to
// see what a request costs in Redis round trips. The handshake of a new
// pooled connection (HELLO, CLIENT SETINFO, ...), which go-redis runs
// through the same hooks, is counted apart: it is not a cost of any one
// request. Neither is the store's read of its layout version (a GET of
// <prefix>layout, at most once a second per gateway: see
// idempotency.LayoutGuard), counted apart too.
type RoundTrips struct{ requests, setup, layout atomic.Int64 }

var _ redis.Hook = (*RoundTrips)(nil)

// Count reports the round trips so far, connection handshakes excluded.
func (r *RoundTrips) Count() int64 { return r.requests.Load() }

// Setup reports the round trips spent on connection handshakes.
func (r *RoundTrips) Setup() int64 { return r.setup.Load() }

// LayoutReads reports the round trips spent reading the layout version.
func (r *RoundTrips) LayoutReads() int64 { return r.layout.Load() }

// DialHook passes dials through uncounted.
func (r *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a single command.
func (r *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.count(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline (or transaction) once.
func (r *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 {
			r.count(cmds[0])
		}
		return next(ctx, cmds)
	}
}

func (r *RoundTrips) count(first redis.Cmder) {
	switch first.Name() {
	case "hello", "auth", "client", "select", "readonly":
		r.setup.Add(1)
	case "get":
		if args := first.Args(); len(args) == 2 && strings.HasSuffix(fmt.Sprint(args[1]), "layout") {
			r.layout.Add(1)
			return
		}
		r.requests.Add(1)
	default:
		r.requests.Add(1)
	}
}
