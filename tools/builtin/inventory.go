package builtin

import (
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Disk is one data disk of a Resource.
type Disk struct {
	Size int    `json:"size"`
	Type string `json:"type"`
}

// Resource is what provision-infra allocates and lookup-resource finds.
type Resource struct {
	ID          string    `json:"resource_id"`
	Name        string    `json:"name"`
	Region      string    `json:"region"`
	CPUs        int       `json:"cpus"`
	MemoryGB    int       `json:"memory_gb"`
	Disks       []Disk    `json:"disks"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
	ExecutionID string    `json:"execution_id,omitempty"`
	// FencingToken is the token of the claim that created the resource.
	FencingToken int64 `json:"fencing_token,omitempty"`

	tenant string
}

// Inventory is the in-memory backend of provision-infra and lookup-resource,
// playing the part of a real provisioning API: it remembers resources per
// tenant, which idempotency key created which resource, and the highest
// fencing token seen per key. It is safe for concurrent use.
type Inventory struct {
	mu      sync.Mutex
	byID    map[string]*Resource
	byKey   map[scopedKey]*Resource
	highest map[scopedKey]int64
}

// scopedKey is an idempotency key in its tenant, the scope the gateway
// gives keys too.
type scopedKey struct{ tenant, key string }

// NewInventory returns an empty Inventory.
func NewInventory() *Inventory {
	return &Inventory{
		byID:    make(map[string]*Resource),
		byKey:   make(map[scopedKey]*Resource),
		highest: make(map[scopedKey]int64),
	}
}

// staleTokenError reports a write from an owner whose claim was superseded.
type staleTokenError struct {
	token, highest int64
}

// admit records token as seen for the key and refuses it when a larger one
// was seen before: that larger token belongs to a newer claim of the same
// call, so this caller lost its lease and must not write.
func (inv *Inventory) admit(k scopedKey, token int64) *staleTokenError {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.admitLocked(k, token)
}

func (inv *Inventory) admitLocked(k scopedKey, token int64) *staleTokenError {
	if highest := inv.highest[k]; token < highest {
		return &staleTokenError{token: token, highest: highest}
	}
	inv.highest[k] = token
	return nil
}

// commit stores r for the key, fencing-checked again at write time (a newer
// owner may have appeared while this one worked). A key that already created
// a resource gets that resource back: a takeover after a lost lease must not
// allocate a second one. created reports whether r was stored.
func (inv *Inventory) commit(k scopedKey, token int64, r *Resource) (stored *Resource, created bool, stale *staleTokenError) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if k.key != "" {
		if stale := inv.admitLocked(k, token); stale != nil {
			return nil, false, stale
		}
		if existing, ok := inv.byKey[k]; ok {
			return existing, false, nil
		}
	}
	r.ID = "res_" + strings.ToLower(ulid.Make().String())
	r.tenant = k.tenant
	inv.byID[r.ID] = r
	if k.key != "" {
		inv.byKey[k] = r
	}
	return r, true, nil
}

// Find returns the resource with id that tenant provisioned. Another
// tenant's resource is not found.
func (inv *Inventory) Find(tenant, id string) (Resource, bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	r, ok := inv.byID[id]
	if !ok || r.tenant != tenant {
		return Resource{}, false
	}
	return *r, true
}

// Len reports how many resources were provisioned.
func (inv *Inventory) Len() int {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return len(inv.byID)
}
