package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/pins"
)

// The tool pins live in one hash, <prefix>T{pins} (tool name →
// pins.Encode): a handful of entries per gateway, read at each listing of
// an MCP server, so one key (one Cluster slot) is enough. It adds no
// layout version: a store without it has no pins yet.

var _ pins.Store = (*Store)(nil)

// pinsKey names the pins hash.
func (k keyLayout) pins() string { return k.prefix + "T{pins}" }

// Pin implements pins.Store.
func (s *Store) Pin(ctx context.Context, tool string) (pins.Pin, error) {
	raw, err := s.client.HGet(ctx, s.keys.pins(), tool).Bytes()
	if errors.Is(err, redis.Nil) {
		return pins.Pin{}, pins.ErrNotFound
	}
	if err != nil {
		return pins.Pin{}, fmt.Errorf("redisstore: read the pin of %q: %w", tool, err)
	}
	return pins.Decode(raw)
}

// PinFirst implements pins.Store: HSETNX, then the winner's pin when it
// was not this one.
func (s *Store) PinFirst(ctx context.Context, p pins.Pin) (pins.Pin, bool, error) {
	encoded, err := pins.Encode(p)
	if err != nil {
		return pins.Pin{}, false, err
	}
	created, err := s.client.HSetNX(ctx, s.keys.pins(), p.Tool, encoded).Result()
	if err != nil {
		return pins.Pin{}, false, fmt.Errorf("redisstore: pin %q: %w", p.Tool, err)
	}
	if created {
		return p, true, nil
	}
	stored, err := s.Pin(ctx, p.Tool)
	return stored, false, err
}

// SetPin implements pins.Store.
func (s *Store) SetPin(ctx context.Context, p pins.Pin) error {
	encoded, err := pins.Encode(p)
	if err != nil {
		return err
	}
	if err := s.client.HSet(ctx, s.keys.pins(), p.Tool, encoded).Err(); err != nil {
		return fmt.Errorf("redisstore: set the pin of %q: %w", p.Tool, err)
	}
	return nil
}

// Pins implements pins.Store.
func (s *Store) Pins(ctx context.Context) ([]pins.Pin, error) {
	all, err := s.client.HGetAll(ctx, s.keys.pins()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: read the pins: %w", err)
	}
	return pins.DecodeAll(slices.Collect(maps.Values(all)))
}
