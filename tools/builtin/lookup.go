package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/toolgateway/toolgateway/tools"
)

// lookupTool finds a resource provisioned by provision-infra. It is
// read-only: the gateway stores nothing for it and runs it on every call.
type lookupTool struct {
	counter   *Counter
	inventory *Inventory
}

func (t *lookupTool) Spec() tools.Spec {
	return tools.Spec{
		Name:        LookupResourceName,
		Description: "Look up a resource created by provision-infra by its resource_id. Read-only: safe to call any number of times, needs no idempotency key.",
		InputSchema: bundledSchema(LookupResourceName),
		ReadOnly:    true,
	}
}

func (t *lookupTool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	t.counter.record(LookupResourceName, req.IdempotencyKey)
	var args struct {
		ResourceID string `json:"resource_id"`
	}
	if err := json.Unmarshal(req.Arguments, &args); err != nil {
		return nil, fmt.Errorf("lookup-resource: decode arguments: %w", err)
	}
	resource, ok := t.inventory.Find(req.Tenant, args.ResourceID)
	if !ok {
		return tools.JSON(http.StatusNotFound, map[string]string{
			"error":       "resource_not_found",
			"resource_id": args.ResourceID,
		})
	}
	return tools.JSON(http.StatusOK, resource)
}
