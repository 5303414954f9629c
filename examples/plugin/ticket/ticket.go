// Package ticket is an example gateway plugin: the open-ticket tool, written
// in its own module against github.com/toolgateway/toolgateway/tools only.
// A blank import of the package registers the tool (see init), the way a
// database/sql driver registers itself.
package ticket

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/toolgateway/toolgateway/tools"
)

// Name is the tool's name: POST /api/tools/v1/open-ticket.
const Name = "open-ticket"

// inputSchema is checked by the gateway before Call runs: Call only ever
// sees arguments that satisfy it.
const inputSchema = `{
  "type": "object",
  "properties": {
    "title":    {"type": "string", "minLength": 3, "maxLength": 120},
    "priority": {"type": "string", "enum": ["low", "normal", "urgent"]},
    "body":     {"type": "string", "maxLength": 10000}
  },
  "required": ["title", "priority"],
  "additionalProperties": false
}`

// Tool opens tickets in a Tracker. It is safe for concurrent use.
type Tool struct {
	tracker *Tracker
}

// New returns the tool backed by tracker.
func New(tracker *Tracker) *Tool {
	return &Tool{tracker: tracker}
}

// init registers the tool with the gateway's plugin registry. A gateway
// binary that imports this package serves open-ticket.
func init() {
	tools.Register(New(NewTracker()))
}

// Spec describes the tool to the gateway and, through discovery, to models.
func (t *Tool) Spec() tools.Spec {
	return tools.Spec{
		Name:        Name,
		Description: "Open a support ticket. Returns the ticket with its id.",
		InputSchema: json.RawMessage(inputSchema),
	}
}

// Call opens one ticket. A 201 (or the 409 of a stale owner) is recorded by
// the gateway and replayed to retries; an error is not recorded, so the
// agent's retry runs the tool again.
func (t *Tool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	var args struct {
		Title    string `json:"title"`
		Priority string `json:"priority"`
		Body     string `json:"body"`
	}
	if err := json.Unmarshal(req.Arguments, &args); err != nil {
		return nil, fmt.Errorf("open-ticket: decode arguments: %w", err)
	}
	// ScopedKey is the client's key scoped by tenant and tool, as the
	// gateway's record is: two tenants sending the same key never share the
	// tracker's deduplication. Empty for a read-only call (none here).
	ticket, created, err := t.tracker.Open(ctx, req.ScopedKey, req.FencingToken, Ticket{
		Title: args.Title, Priority: args.Priority, Body: args.Body,
	})
	switch {
	case errors.Is(err, ErrStaleFencingToken):
		return tools.JSON(http.StatusConflict, map[string]string{"error": "stale_fencing_token"})
	case err != nil:
		return nil, fmt.Errorf("open-ticket: %w", err)
	case !created:
		return tools.JSON(http.StatusOK, ticket)
	}
	return tools.JSON(http.StatusCreated, ticket)
}
