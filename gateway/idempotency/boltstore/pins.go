package boltstore

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/pins"
)

// pinsBucket holds the tool pins (tool name → pins.Encode), created by the
// first pin: no layout version of its own, a file without it has no pins.
var pinsBucket = []byte("tool_pins")

var _ pins.Store = (*Store)(nil)

// Pin implements pins.Store.
func (s *Store) Pin(ctx context.Context, tool string) (pins.Pin, error) {
	if err := ctx.Err(); err != nil {
		return pins.Pin{}, err
	}
	var p pins.Pin
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(pinsBucket)
		if b == nil {
			return pins.ErrNotFound
		}
		raw := b.Get([]byte(tool))
		if raw == nil {
			return pins.ErrNotFound
		}
		var err error
		p, err = pins.Decode(raw)
		return err
	})
	return p, err
}

// PinFirst implements pins.Store: one write transaction.
func (s *Store) PinFirst(ctx context.Context, p pins.Pin) (pins.Pin, bool, error) {
	encoded, err := pins.Encode(p)
	if err != nil {
		return pins.Pin{}, false, err
	}
	stored, created := p, false
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(pinsBucket)
		if err != nil {
			return err
		}
		if raw := b.Get([]byte(p.Tool)); raw != nil {
			stored, err = pins.Decode(raw)
			return err
		}
		created = true
		return b.Put([]byte(p.Tool), encoded)
	})
	if err != nil {
		return pins.Pin{}, false, fmt.Errorf("boltstore: pin %q: %w", p.Tool, err)
	}
	return stored, created, nil
}

// SetPin implements pins.Store.
func (s *Store) SetPin(ctx context.Context, p pins.Pin) error {
	encoded, err := pins.Encode(p)
	if err != nil {
		return err
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(pinsBucket)
		if err != nil {
			return err
		}
		return b.Put([]byte(p.Tool), encoded)
	})
	if err != nil {
		return fmt.Errorf("boltstore: set the pin of %q: %w", p.Tool, err)
	}
	return nil
}

// Pins implements pins.Store (bbolt keeps keys sorted).
func (s *Store) Pins(ctx context.Context) ([]pins.Pin, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []pins.Pin
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(pinsBucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, raw []byte) error {
			p, err := pins.Decode(raw)
			if err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}
