package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/toolgateway/toolgateway/tools"
)

// echoTool answers with the exact bytes of its arguments. Two optional
// members steer the answer, so smoke tests can exercise the gateway's
// recording rules and timeouts: status (200–599) and delay_ms.
type echoTool struct {
	counter *Counter
}

// echoControls are the members of the arguments that steer echo.
// They decode as float64 because the schema's "integer" admits 200.0.
type echoControls struct {
	Status  float64 `json:"status"`
	DelayMS float64 `json:"delay_ms"`
}

func (t *echoTool) Spec() tools.Spec {
	return tools.Spec{
		Name:        EchoName,
		Description: "Returns its arguments unchanged. Optional: status (HTTP status to answer with) and delay_ms (wait before answering). For smoke tests.",
		InputSchema: bundledSchema(EchoName),
	}
}

func (t *echoTool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	t.counter.record(EchoName, req.IdempotencyKey)
	var controls echoControls
	if err := json.Unmarshal(req.Arguments, &controls); err != nil {
		return nil, fmt.Errorf("echo: decode arguments: %w", err)
	}
	status := http.StatusOK
	if controls.Status != 0 {
		status = int(controls.Status)
		if float64(status) != controls.Status || status < 200 || status > 599 {
			return nil, fmt.Errorf("echo: status %v is not an integer in 200–599", controls.Status)
		}
	}
	if controls.DelayMS > 0 {
		timer := time.NewTimer(time.Duration(controls.DelayMS) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("echo: interrupted during delay_ms: %w", ctx.Err())
		}
	}
	return &tools.Response{
		Status:      status,
		ContentType: "application/json",
		Body:        append([]byte(nil), req.Arguments...),
	}, nil
}
