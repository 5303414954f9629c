package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/boltreceipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/pgreceipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
)

// ReceiptsConfig is the receipts section (docs/receipts.md). Receipts are
// kept in the configured store: Redis under the store's key prefix,
// PostgreSQL in the store's schema, the embedded store's file.
type ReceiptsConfig struct {
	// Enabled is true unless set false: every consequential event leaves a
	// receipt. Off exists to measure what receipts cost.
	Enabled *bool `yaml:"enabled"`
	// Retention is how long receipts are kept (default 30d).
	Retention Duration `yaml:"retention"`
	// RecoverAfter is how old an executed call's receipt outbox entry must
	// be before the recovery sweep appends its receipt (default 2m):
	// longer than the writer's own retries, so the sweep only takes what
	// a gateway that died left behind.
	RecoverAfter Duration `yaml:"recover_after"`
}

// receiptsOn reports whether receipts are kept.
func (c *Config) receiptsOn() bool {
	return c.Receipts.Enabled == nil || *c.Receipts.Enabled
}

// checkReceipts checks the receipts section.
func (c *Config) checkReceipts() error {
	if c.Receipts.Retention < 0 {
		return fmt.Errorf("receipts.retention: %s: must be positive", time.Duration(c.Receipts.Retention))
	}
	if r := time.Duration(c.Receipts.Retention); r != 0 && r < time.Hour {
		return fmt.Errorf("receipts.retention: %s: must be at least 1h", r)
	}
	if r := time.Duration(c.Receipts.RecoverAfter); r < 0 || (r != 0 && r < time.Second) {
		return fmt.Errorf("receipts.recover_after: %s: must be at least 1s", r)
	}
	return nil
}

// receiptsFor is the receipts store beside the idempotency store (nil when
// receipts are off).
func (c *Config) receiptsFor(ctx context.Context, store idempotency.Store) (receipts.Store, error) {
	if !c.receiptsOn() {
		return nil, nil
	}
	switch s := store.(type) {
	case clientOwningStore:
		return redisreceipts.New(s.client, orString(c.Store.KeyPrefix, redisstore.DefaultPrefix), nil), nil
	case *pgstore.Store:
		r, err := pgreceipts.New(ctx, s.Pool(), s.Schema(), nil)
		if err != nil {
			return nil, fmt.Errorf("receipts: %w", err)
		}
		return r, nil
	case *boltstore.Store:
		r, err := boltreceipts.New(s.DB(), nil)
		if err != nil {
			return nil, fmt.Errorf("receipts: %w", err)
		}
		return r, nil
	}
	return nil, errors.New("receipts: this store keeps no receipts")
}
