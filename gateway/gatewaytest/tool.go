package gatewaytest

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/toolgateway/toolgateway/tools"
)

// Tool is a real in-process tool whose behaviour a test scripts and whose
// executions it counts, per idempotency key and in total.
type Tool struct {
	Name     string
	Schema   string
	ReadOnly bool
	// Started receives each request as it starts, if non-nil.
	Started chan *tools.Request
	// Behave decides the outcome; nil means 200
	// {"ok":true,"n":<count>,"execution_id":...}.
	Behave func(ctx context.Context, req *tools.Request) (*tools.Response, error)
	// Total counts the executions.
	Total atomic.Int64

	mu     sync.Mutex
	perKey map[string]int
}

// NewTool returns a mutating tool named name, without a schema.
func NewTool(name string) *Tool {
	return &Tool{Name: name, perKey: map[string]int{}}
}

// Spec describes the tool: "test tool <name>".
func (t *Tool) Spec() tools.Spec {
	return tools.Spec{Name: t.Name, Description: "test tool " + t.Name, InputSchema: json.RawMessage(t.Schema), ReadOnly: t.ReadOnly}
}

// Call counts the execution, then answers by Behave.
func (t *Tool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	n := t.Total.Add(1)
	t.mu.Lock()
	t.perKey[req.IdempotencyKey]++
	t.mu.Unlock()
	if t.Started != nil {
		t.Started <- req
	}
	if t.Behave != nil {
		return t.Behave(ctx, req)
	}
	return tools.JSON(200, map[string]any{"ok": true, "n": n, "execution_id": req.ExecutionID})
}

// Runs returns how often the tool ran under key.
func (t *Tool) Runs(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.perKey[key]
}
