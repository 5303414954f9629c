package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Memory is the Backend of a single gateway process (the embedded store):
// the same GCRA as redis_rate's Lua script, in process. Limits are not
// shared with other processes and start afresh on restart.
type Memory struct {
	now func() time.Time

	mu sync.Mutex
	// tat is each tenant's theoretical arrival time (GCRA).
	tat map[string]time.Time
	// inFlight is each tenant's holders.
	inFlight map[string]map[string]struct{}
}

var _ Backend = (*Memory)(nil)

// NewMemory returns an empty in-process Backend. now is the clock; nil
// means time.Now.
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, tat: map[string]time.Time{}, inFlight: map[string]map[string]struct{}{}}
}

// Allow is GCRA: each call moves the tenant's theoretical arrival time on
// by Period/Rate; a call is refused while that time is more than
// Burst intervals ahead of now.
func (m *Memory) Allow(_ context.Context, tenant string, l Limit) (Verdict, error) {
	if err := l.Validate(); err != nil {
		return Verdict{}, err
	}
	emission, burstOffset := l.GCRA()
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	tat := m.tat[tenant]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(emission)
	if allowAt := next.Add(-burstOffset); now.Before(allowAt) {
		return Verdict{RetryAfter: allowAt.Sub(now)}, nil
	}
	m.tat[tenant] = next
	return Verdict{Allowed: true}, nil
}

// Acquire takes a slot; lease is not needed in one process (the slots die
// with it).
func (m *Memory) Acquire(_ context.Context, tenant, holder string, max int, _ time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	holders := m.inFlight[tenant]
	if _, held := holders[holder]; held {
		return true, nil
	}
	if len(holders) >= max {
		return false, nil
	}
	if holders == nil {
		holders = map[string]struct{}{}
		m.inFlight[tenant] = holders
	}
	holders[holder] = struct{}{}
	return true, nil
}

// Renew does nothing: a slot in memory lives until Release.
func (m *Memory) Renew(context.Context, string, string, time.Duration) error { return nil }

// Release gives the slot back.
func (m *Memory) Release(_ context.Context, tenant, holder string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.inFlight[tenant], holder)
	if len(m.inFlight[tenant]) == 0 {
		delete(m.inFlight, tenant)
	}
	return nil
}
