package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolgateway/toolgateway/gateway/pins"
)

// The tool pins live in the table tool_pins of the store's schema (tool,
// pin: pins.Encode as text), created on first use like the receipts'
// tables: it adds no schema version, a schema without it has no pins.

var _ pins.Store = (*Store)(nil)

// pinsTable creates the table once per process (again after a failure).
type pinsTable struct {
	mu    sync.Mutex
	ready bool
}

// ensurePins creates tool_pins when this process has not yet.
func (s *Store) ensurePins(ctx context.Context) error {
	t := &s.pinsTable
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ready {
		return nil
	}
	create := `CREATE TABLE IF NOT EXISTS ` + s.pinsName() + ` (tool text PRIMARY KEY, pin text NOT NULL)`
	_, err := s.pool.Exec(ctx, create)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		// Two gateways created it at once (CREATE TABLE IF NOT EXISTS is
		// not safe against itself): it exists now.
		err = nil
	}
	if err != nil {
		return fmt.Errorf("pgstore: create tool_pins: %w", err)
	}
	t.ready = true
	return nil
}

func (s *Store) pinsName() string {
	return pgx.Identifier{s.schema, "tool_pins"}.Sanitize()
}

// Pin implements pins.Store.
func (s *Store) Pin(ctx context.Context, tool string) (pins.Pin, error) {
	if err := s.ensurePins(ctx); err != nil {
		return pins.Pin{}, err
	}
	var raw string
	err := s.pool.QueryRow(ctx, `SELECT pin FROM `+s.pinsName()+` WHERE tool = $1`, tool).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return pins.Pin{}, pins.ErrNotFound
	}
	if err != nil {
		return pins.Pin{}, fmt.Errorf("pgstore: read the pin of %q: %w", tool, err)
	}
	return pins.Decode([]byte(raw))
}

// PinFirst implements pins.Store: one statement inserts unless a pin is
// there, then the one that is.
func (s *Store) PinFirst(ctx context.Context, p pins.Pin) (pins.Pin, bool, error) {
	if err := s.ensurePins(ctx); err != nil {
		return pins.Pin{}, false, err
	}
	encoded, err := pins.Encode(p)
	if err != nil {
		return pins.Pin{}, false, err
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO `+s.pinsName()+` (tool, pin) VALUES ($1, $2) ON CONFLICT (tool) DO NOTHING`, p.Tool, string(encoded))
	if err != nil {
		return pins.Pin{}, false, fmt.Errorf("pgstore: pin %q: %w", p.Tool, err)
	}
	if tag.RowsAffected() == 1 {
		return p, true, nil
	}
	stored, err := s.Pin(ctx, p.Tool)
	return stored, false, err
}

// SetPin implements pins.Store.
func (s *Store) SetPin(ctx context.Context, p pins.Pin) error {
	if err := s.ensurePins(ctx); err != nil {
		return err
	}
	encoded, err := pins.Encode(p)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO `+s.pinsName()+` (tool, pin) VALUES ($1, $2) ON CONFLICT (tool) DO UPDATE SET pin = EXCLUDED.pin`, p.Tool, string(encoded))
	if err != nil {
		return fmt.Errorf("pgstore: set the pin of %q: %w", p.Tool, err)
	}
	return nil
}

// Pins implements pins.Store.
func (s *Store) Pins(ctx context.Context) ([]pins.Pin, error) {
	if err := s.ensurePins(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT pin FROM `+s.pinsName()+` ORDER BY tool`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: read the pins: %w", err)
	}
	raws, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgstore: read the pins: %w", err)
	}
	return pins.DecodeAll(raws)
}
