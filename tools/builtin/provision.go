package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/toolgateway/toolgateway/tools"
)

// provisionTool allocates a resource. It behaves like a careful backend
// should behind the gateway: it deduplicates by idempotency key and refuses
// a fencing token lower than one it has already seen for the key with 409.
type provisionTool struct {
	counter   *Counter
	inventory *Inventory
}

type provisionArgs struct {
	Name     string `json:"name"`
	Region   string `json:"region"`
	CPUs     int    `json:"cpus"`
	MemoryGB int    `json:"memory_gb"`
	Disks    []Disk `json:"disks"`
}

func (t *provisionTool) Spec() tools.Spec {
	return tools.Spec{
		Name:        ProvisionInfraName,
		Description: "Provision infrastructure for a workload: a machine with the given CPUs, memory and data disks in a region. Returns the new resource and its resource_id. Not read-only: call it once per workload.",
		InputSchema: bundledSchema(ProvisionInfraName),
	}
}

func (t *provisionTool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	t.counter.record(ProvisionInfraName, req.IdempotencyKey)
	var args provisionArgs
	if err := json.Unmarshal(req.Arguments, &args); err != nil {
		return nil, fmt.Errorf("provision-infra: decode arguments: %w", err)
	}
	key := scopedKey{tenant: req.Tenant, key: req.IdempotencyKey}

	// Check the token before doing any work, as a backend would before
	// starting a long operation...
	if key.key != "" {
		if stale := t.inventory.admit(key, req.FencingToken); stale != nil {
			return staleResponse(stale)
		}
	}
	resource := newResource(args, req)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("provision-infra: %w", err)
	}
	// ...and again when writing, since a newer owner may have started
	// meanwhile.
	stored, created, stale := t.inventory.commit(key, req.FencingToken, resource)
	if stale != nil {
		return staleResponse(stale)
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	return tools.JSON(status, stored)
}

// newResource fills the defaults the schema describes.
func newResource(args provisionArgs, req *tools.Request) *Resource {
	memory := args.MemoryGB
	if memory == 0 {
		memory = 2 * args.CPUs
	}
	disks := make([]Disk, 0, len(args.Disks))
	for _, d := range args.Disks {
		if d.Type == "" {
			d.Type = "ssd"
		}
		disks = append(disks, d)
	}
	return &Resource{
		Name:         args.Name,
		Region:       args.Region,
		CPUs:         args.CPUs,
		MemoryGB:     memory,
		Disks:        disks,
		Status:       "provisioned",
		CreatedAt:    time.Now().UTC().Truncate(time.Millisecond),
		ExecutionID:  req.ExecutionID,
		FencingToken: req.FencingToken,
	}
}

func staleResponse(stale *staleTokenError) (*tools.Response, error) {
	return tools.JSON(http.StatusConflict, map[string]any{
		"error":         "stale_fencing_token",
		"message":       "a newer claim of this call exists; this execution must not write",
		"fencing_token": stale.token,
		"highest_seen":  stale.highest,
	})
}
