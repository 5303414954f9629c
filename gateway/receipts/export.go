package receipts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Export writes every chain of s, with its checkpoints, as JSON lines:
// the input of [VerifyWith]. See [ExportFiltered].
func Export(ctx context.Context, s Store, w io.Writer) error {
	return ExportFiltered(ctx, s, w, Filter{})
}

// ExportFiltered writes the chains f selects (f.Tenant's, or every
// tenant's when it is empty: those the store lists and those its
// checkpoint index names, so a chain unlisted by hand is still written).
// Per chain: a [ChainHeader] line, the receipts that match f in seq
// order, page by page, then the chain's checkpoints ([CheckpointLine]).
// A header says Filtered when f selects by time, tool or event.
func ExportFiltered(ctx context.Context, s Store, w io.Writer, f Filter) error {
	tenants := []string{f.Tenant}
	if f.Tenant == "" {
		listed, err := s.Tenants(ctx)
		if err != nil {
			return fmt.Errorf("receipts: export: %w", err)
		}
		checkpointed, err := s.CheckpointTenants(ctx)
		if err != nil {
			return fmt.Errorf("receipts: export: %w", err)
		}
		tenants = slices.Compact(slices.Sorted(slices.Values(append(listed, checkpointed...))))
	}
	f.Limit = MaxLimit
	filtered := !f.Since.IsZero() || !f.Until.IsZero() || f.Tool != "" || f.Event != ""
	for _, tenant := range tenants {
		f.Tenant, f.After = tenant, 0
		if err := writeLine(w, ChainHeader{Chain: tenant, Filtered: filtered}); err != nil {
			return err
		}
		if err := exportTenant(ctx, s, w, f); err != nil {
			return err
		}
		checkpoints, err := s.Checkpoints(ctx, tenant)
		if err != nil {
			return fmt.Errorf("receipts: export %s: checkpoints: %w", tenant, err)
		}
		for _, c := range checkpoints {
			c.Time = c.Time.UTC()
			if err := writeLine(w, CheckpointLine{Checkpoint: c}); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeLine writes v as one JSON line.
func writeLine(w io.Writer, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("receipts: export: encode: %w", err)
	}
	if _, err := w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("receipts: export: write: %w", err)
	}
	return nil
}

// exportTenant writes the stored lines of f.Tenant's receipts that
// match f, never re-encoded: what verify reads of a filtered export is
// what the store holds too, so a line edited into two readings is
// refused whatever the filter. A line that does not decode cannot be
// told out of the selection and is written (verify then names it).
func exportTenant(ctx context.Context, s Store, w io.Writer, f Filter) error {
	for after := int64(0); ; {
		lines, next, err := s.Lines(ctx, f.Tenant, after, MaxLimit)
		if err != nil {
			return fmt.Errorf("receipts: export %s after seq %d: %w", f.Tenant, after, err)
		}
		for _, line := range lines {
			if r, err := Decode(line); err == nil && !f.Match(r) {
				continue
			}
			if _, err := w.Write(append(bytes.TrimRight(line, "\n"), '\n')); err != nil {
				return fmt.Errorf("receipts: export: write: %w", err)
			}
		}
		if next == 0 {
			return nil
		}
		after = next
	}
}

// ReadCheckpoints reads the checkpoint lines ([CheckpointLine]) of r, an
// export or a copy of its checkpoints, strictly; other lines are skipped.
func ReadCheckpoints(r io.Reader) ([]Checkpoint, error) {
	var out []Checkpoint
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		raw, err := br.ReadBytes('\n')
		if bytes.Contains(raw, []byte(`"checkpoint"`)) {
			var members map[string]json.RawMessage
			if jerr := json.Unmarshal(raw, &members); jerr != nil {
				return nil, fmt.Errorf("receipts: line %d: not a JSON object: %w", line, jerr)
			}
			if members["checkpoint"] != nil {
				var cl CheckpointLine
				if derr := decodeStrict(raw, checkpointSchema, &cl); derr != nil {
					return nil, fmt.Errorf("receipts: line %d: checkpoint: %w", line, derr)
				}
				out = append(out, cl.Checkpoint)
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("receipts: read line %d: %w", line, err)
		}
	}
}
