package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// balancer sends every HTTP attempt to a random replica: the SDK retries a
// refused connection (a killed replica) and the next attempt likely lands
// on a live one.
type balancer struct {
	addrs    []string
	base     http.RoundTripper
	attempts atomic.Int64

	mu  sync.Mutex
	rng *rand.Rand
}

// RoundTrip implements http.RoundTripper.
func (b *balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	addr := b.addrs[b.rng.IntN(len(b.addrs))]
	b.mu.Unlock()
	b.attempts.Add(1)
	out := req.Clone(req.Context())
	out.URL.Host, out.Host = addr, ""
	return b.base.RoundTrip(out)
}

// answerKind classifies what a step ended with.
type answerKind string

const (
	answerResult     answerKind = "result"          // the tool's outcome, executed or replayed
	answerUnknown    answerKind = "outcome_unknown" // 409, or the uncertain outcome that made it (lease_expiry: unknown)
	answerUnexpected answerKind = "unexpected"      // any other final error: a violation
	answerLost       answerKind = "lost"            // no final answer within the step deadline
)

// answer is one final answer to a step.
type answer struct {
	Kind        answerKind
	Status      int
	Body        string
	ExecutionID string
	Replayed    bool
	Detail      string
}

func (a answer) sameAs(b answer) bool {
	return a.Kind == b.Kind && a.Status == b.Status && a.Body == b.Body && a.ExecutionID == b.ExecutionID
}

// step is one agent step and every final answer it got.
type step struct {
	Agent   int
	Session string
	Index   uint64
	Tool    string
	Args    []byte
	Key     string
	Answers []answer
}

// agent runs steps one after the other until stop, each step to a final
// answer, then replays it cfg.Replays times.
type agent struct {
	id      int
	session *agentclient.Session
	cfg     Config
	rng     *rand.Rand
	steps   []*step
	// addrs are the replicas (an MCP attempt picks one: an MCP session
	// stays on its replica); mcpHTTP carries the MCP attempts.
	addrs       []string
	mcpHTTP     *http.Client
	mcpAttempts *atomic.Int64
}

func (a *agent) run(ctx context.Context, stop time.Time) {
	for index := uint64(0); time.Now().Before(stop) && ctx.Err() == nil; index++ {
		tool := toolRerun
		if a.rng.IntN(3) == 0 {
			tool = toolUnknown
		}
		s := &step{Agent: a.id, Session: a.session.ID(), Index: index, Tool: tool,
			Args: fmt.Appendf(nil, `{"agent":%d,"step":%d,"amount":%d}`, a.id, index, a.rng.IntN(1000))}
		key, err := keyderive.Key(s.Session, s.Index, s.Tool, s.Args)
		a.steps = append(a.steps, s)
		if err != nil { // cannot happen: the arguments are a JSON object
			s.Answers = append(s.Answers, answer{Kind: answerUnexpected, Detail: err.Error()})
			return
		}
		s.Key = key
		for range 1 + a.cfg.Replays {
			ans := a.final(ctx, s)
			s.Answers = append(s.Answers, ans)
			if ans.Kind == answerLost || ans.Kind == answerUnexpected {
				break
			}
		}
	}
}

// final calls the step until it gets a final answer or its deadline passes,
// each attempt over REST or (with cfg.MCP, half the time) over MCP.
func (a *agent) final(ctx context.Context, s *step) answer {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.StepDeadline)
	defer cancel()
	for {
		if a.cfg.MCP && a.rng.IntN(2) == 0 {
			if ans, final := a.attemptMCP(ctx, s); final {
				if a.waitForReconcile(ctx, ans) {
					continue
				}
				return ans
			} else if ctx.Err() != nil {
				return answer{Kind: answerLost, Detail: ans.Detail}
			}
			if sleepCtx(ctx, 50*time.Millisecond) != nil {
				return answer{Kind: answerLost, Detail: "deadline while retrying over MCP"}
			}
			continue
		}
		if ans, final := a.attemptREST(ctx, s); final {
			if a.waitForReconcile(ctx, ans) {
				continue
			}
			return ans
		}
	}
}

// waitForReconcile: with Config.Reconcile, outcome_unknown is not final
// (reconciliation resolves the record): it sleeps a little and says to
// call again, until the step's deadline.
func (a *agent) waitForReconcile(ctx context.Context, ans answer) bool {
	return a.cfg.Reconcile && ans.Kind == answerUnknown && sleepCtx(ctx, 100*time.Millisecond) == nil
}

// attemptREST calls the step through agentclient, whose own retries cover
// network errors, 409 request_in_progress and 502/503/504; a retryable 500
// (the gateway lost its lease mid-tool) is retried here, as the contract's
// retryable flag allows. final is false when the step must be sent again.
func (a *agent) attemptREST(ctx context.Context, s *step) (ans answer, final bool) {
	for {
		res, err := a.session.Call(ctx, s.Index, s.Tool, s.Args)
		if err == nil {
			return answer{Kind: answerResult, Status: res.Status, Body: string(bytes.TrimSpace(res.Body)),
				ExecutionID: res.ExecutionID, Replayed: res.Replayed}, true
		}
		var problem *agentclient.Error
		switch {
		case errors.As(err, &problem) && (problem.Code == wire.CodeOutcomeUnknown || uncertainAnswer(s.Tool, problem.Code, problem.Retryable)):
			return answer{Kind: answerUnknown, Status: http.StatusConflict}, true
		case ctx.Err() != nil:
			return answer{Kind: answerLost, Detail: err.Error()}, true
		case errors.As(err, &problem) && problem.Retryable:
			if sleepCtx(ctx, 50*time.Millisecond) != nil {
				return answer{Kind: answerLost, Detail: err.Error()}, true
			}
			if a.cfg.MCP {
				return answer{Detail: err.Error()}, false // the next attempt may take the other door
			}
		default:
			return answer{Kind: answerUnexpected, Detail: err.Error()}, true
		}
	}
}

// uncertainAnswer reports whether a failure is the uncertain outcome of a
// lease_expiry: unknown tool: its timeout, drain cancellation or lost
// upstream connection, answered not retryable because the record is now
// UNKNOWN. Every retry would answer outcome_unknown: it is the same final
// answer.
func uncertainAnswer(tool, code string, retryable bool) bool {
	if tool != toolUnknown || retryable {
		return false
	}
	switch code {
	case wire.CodeToolTimeout, wire.CodeToolFailed, wire.CodeUpstreamUnreachable:
		return true
	}
	return false
}

// attemptMCP calls the step once over MCP on a random replica, with go-sdk's
// client (a session per attempt: a replica may die between attempts).
// final is false when the step must be sent again (a transport failure,
// or an answer the contract marks retryable).
func (a *agent) attemptMCP(ctx context.Context, s *step) (ans answer, final bool) {
	a.mcpAttempts.Add(1)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   "http://" + a.addrs[a.rng.IntN(len(a.addrs))] + "/mcp",
		HTTPClient: a.mcpHTTP,
		MaxRetries: -1,
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "chaos-agent", Version: "1"}, nil)
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return answer{Detail: "mcp connect: " + err.Error()}, false
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{
		Name:      s.Tool,
		Arguments: json.RawMessage(s.Args),
		Meta:      mcp.Meta{wire.MetaSessionID: s.Session, wire.MetaStepIndex: s.Index},
	})
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
	case errors.As(err, &rpcErr):
		switch rpcErr.Code {
		case wire.RPCOutcomeUnknown:
			return answer{Kind: answerUnknown, Status: http.StatusConflict}, true
		case wire.RPCInvalidParams:
			return answer{Kind: answerUnexpected, Detail: fmt.Sprintf("mcp error %d: %s %s", rpcErr.Code, rpcErr.Message, rpcErr.Data)}, true
		}
		// In progress, store unavailable, rate limited, or the client's
		// transport giving up on a replica that went away (go-sdk reports
		// it as a JSON-RPC error too): send the step again.
		return answer{Detail: fmt.Sprintf("mcp error %d: %s", rpcErr.Code, rpcErr.Message)}, false
	default:
		return answer{Detail: "mcp call: " + err.Error()}, false // transport: the replica died
	}
	if res.IsError {
		var failure struct {
			Code      string `json:"code"`
			Retryable bool   `json:"retryable"`
		}
		raw, _ := json.Marshal(res.Meta[wire.MetaError])
		_ = json.Unmarshal(raw, &failure)
		switch {
		case uncertainAnswer(s.Tool, failure.Code, failure.Retryable):
			return answer{Kind: answerUnknown, Status: http.StatusConflict}, true
		case failure.Retryable:
			return answer{Detail: "mcp tool failure " + failure.Code}, false
		}
		return answer{Kind: answerUnexpected, Detail: "mcp tool failure " + failure.Code}, true
	}
	var body string
	if len(res.Content) > 0 {
		if text, ok := res.Content[0].(*mcp.TextContent); ok {
			body = text.Text
		}
	}
	execID, _ := res.Meta[wire.MetaExecutionID].(string)
	replayed, _ := res.Meta[wire.MetaReplayed].(bool)
	// The upstream answers 200 (MCP results carry no status).
	return answer{Kind: answerResult, Status: http.StatusOK, Body: strings.TrimSpace(body), ExecutionID: execID, Replayed: replayed}, true
}

// verify sends every step once more after the faults stopped.
func (a *agent) verify(ctx context.Context) {
	for _, s := range a.steps {
		s.Answers = append(s.Answers, a.final(ctx, s))
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
