package benchtool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/wire"
)

// API is the gateway API a load calls.
type API string

// The gateway's APIs.
const (
	// APIREST posts to /api/tools/v1/{tool}, the identity in headers.
	APIREST API = "rest"
	// APIMCP sends a tools/call to /mcp, the identity in params._meta.
	APIMCP API = "mcp"
)

// ParseAPI checks an API name.
func ParseAPI(s string) (API, error) {
	switch a := API(s); a {
	case APIREST, APIMCP:
		return a, nil
	}
	return "", fmt.Errorf("benchtool: api %q: want rest or mcp", s)
}

// How an MCP answer is counted in Result.Statuses, next to HTTP statuses:
// a tool result without isError counts as 200, one with isError as
// StatusMCPIsError, and a JSON-RPC error under its (negative) code, e.g.
// -32001 request_in_progress.
const StatusMCPIsError = -1

// mcpConnectTimeout bounds the connection of one MCP client session.
const mcpConnectTimeout = 30 * time.Second

// connectMCP connects one go-sdk client session per sending slot, each to
// the /mcp endpoint of its slot's URL, over the load's HTTP client (so its
// keep-alive connections), before anything is measured.
func (l *Load) connectMCP(ctx context.Context) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "gatewaybench", Version: "1"}, nil)
	sessions := make([]*mcp.ClientSession, l.slots())
	errs := make([]error, len(sessions))
	var wg sync.WaitGroup
	// A few at a time: connecting is a handshake per session.
	limit := make(chan struct{}, 8)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit <- struct{}{}
			defer func() { <-limit }()
			connectCtx, cancel := context.WithTimeout(ctx, mcpConnectTimeout)
			defer cancel()
			transport := &mcp.StreamableClientTransport{
				Endpoint:   l.slotURL(i) + "/mcp",
				HTTPClient: l.cfg.Client,
				// A failed call is counted, not retried behind our back.
				MaxRetries: -1,
			}
			cs, err := client.Connect(connectCtx, transport, nil)
			if err != nil {
				errs[i] = fmt.Errorf("benchtool: connect MCP session %d to %s: %w", i, transport.Endpoint, err)
				return
			}
			sessions[i] = cs
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, cs := range sessions {
			if cs != nil {
				_ = cs.Close()
			}
		}
		return err
	}
	l.sessions = sessions
	return nil
}

// mcpSender calls the tool over cs: one tools/call per request, the
// arguments as the canonical bytes REST posts, the identity (session,
// step, and the derived key, which the gateway checks) in _meta.
func (l *Load) mcpSender(cs *mcp.ClientSession) sendFunc {
	return func(ctx context.Context, r *request) (int, bool, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{
			Name:      l.cfg.Tool,
			Arguments: json.RawMessage(r.body),
			Meta: mcp.Meta{
				wire.MetaSessionID:      r.session,
				wire.MetaStepIndex:      r.index,
				wire.MetaIdempotencyKey: r.key,
			},
		})
		if err != nil {
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				return int(rpcErr.Code), false, nil
			}
			return 0, false, fmt.Errorf("benchtool: tools/call: %w", err)
		}
		replayed, _ := res.Meta[wire.MetaReplayed].(bool)
		if res.IsError {
			return StatusMCPIsError, replayed, nil
		}
		return 200, replayed, nil
	}
}

// Close ends the load's MCP client sessions, if any.
func (l *Load) Close() error {
	var errs []error
	for _, cs := range l.sessions {
		errs = append(errs, cs.Close())
	}
	l.sessions = nil
	return errors.Join(errs...)
}
