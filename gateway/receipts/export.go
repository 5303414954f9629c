package receipts

import (
	"context"
	"fmt"
	"io"
)

// Export writes every receipt of every tenant of s as JSON lines (the
// input of [Verify]), each tenant's chain in seq order, page by page.
func Export(ctx context.Context, s Store, w io.Writer) error {
	tenants, err := s.Tenants(ctx)
	if err != nil {
		return fmt.Errorf("receipts: export: %w", err)
	}
	for _, tenant := range tenants {
		if err := exportTenant(ctx, s, w, Filter{Tenant: tenant, Limit: MaxLimit}); err != nil {
			return err
		}
	}
	return nil
}

// exportTenant writes the receipts of f.Tenant that match f.
func exportTenant(ctx context.Context, s Store, w io.Writer, f Filter) error {
	for {
		page, next, err := s.List(ctx, f)
		if err != nil {
			return fmt.Errorf("receipts: export %s after seq %d: %w", f.Tenant, f.After, err)
		}
		for _, r := range page {
			line, err := Encode(r)
			if err != nil {
				return err
			}
			if _, err := w.Write(append(line, '\n')); err != nil {
				return fmt.Errorf("receipts: export: write: %w", err)
			}
		}
		if next == 0 {
			return nil
		}
		f.After = next
	}
}
