package ticket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrStaleFencingToken is returned by Tracker.Open for a write from a
// gateway whose claim on the call was superseded by a newer one.
var ErrStaleFencingToken = errors.New("stale fencing token")

// Ticket is an opened ticket.
type Ticket struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Priority string    `json:"priority"`
	Body     string    `json:"body,omitempty"`
	OpenedAt time.Time `json:"opened_at"`
}

// Tracker stands in for a real ticketing system's API. Like a good backend
// behind the gateway, it takes the idempotency key as its own deduplication
// key and refuses fencing tokens older than one it has seen for the key.
type Tracker struct {
	mu      sync.Mutex
	next    int
	byKey   map[string]Ticket
	highest map[string]int64
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{byKey: make(map[string]Ticket), highest: make(map[string]int64)}
}

// Open opens t unless the same key already opened one, which it returns
// instead (created false). dedupKey "" disables deduplication.
func (tr *Tracker) Open(ctx context.Context, dedupKey string, fencingToken int64, t Ticket) (opened Ticket, created bool, err error) {
	if err := ctx.Err(); err != nil {
		return Ticket{}, false, err
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if dedupKey != "" {
		if fencingToken < tr.highest[dedupKey] {
			return Ticket{}, false, fmt.Errorf("%w: %d < %d", ErrStaleFencingToken, fencingToken, tr.highest[dedupKey])
		}
		tr.highest[dedupKey] = fencingToken
		if existing, ok := tr.byKey[dedupKey]; ok {
			return existing, false, nil
		}
	}
	tr.next++
	t.ID = fmt.Sprintf("TCK-%d", tr.next)
	t.OpenedAt = time.Now().UTC().Truncate(time.Second)
	if dedupKey != "" {
		tr.byKey[dedupKey] = t
	}
	return t, true, nil
}

// Len reports how many tickets were opened.
func (tr *Tracker) Len() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.next
}
