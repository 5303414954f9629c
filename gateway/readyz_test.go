package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
)

// hangingPingStore is a store whose Ping hangs until its context ends
// while down (a Redis that does not answer), recording the deadline each
// ping was given.
type hangingPingStore struct {
	idempotency.Store
	down      atomic.Bool
	mu        sync.Mutex
	deadlines []time.Duration
}

func (s *hangingPingStore) Ping(ctx context.Context) error {
	if deadline, ok := ctx.Deadline(); ok {
		s.mu.Lock()
		s.deadlines = append(s.deadlines, time.Until(deadline))
		s.mu.Unlock()
	} else {
		s.mu.Lock()
		s.deadlines = append(s.deadlines, time.Hour)
		s.mu.Unlock()
	}
	if !s.down.Load() {
		return nil
	}
	<-ctx.Done()
	return errors.New("ping: " + ctx.Err().Error())
}

// lockedLog is a log buffer safe for the server's goroutines.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// /readyz bounds its store ping to 500 ms (Kubernetes' default probe
// timeout is 1 s), and logs one line per change of state, not one per
// probe.
func TestReadyzIsBoundedAndLogsStateChanges(t *testing.T) {
	store := &hangingPingStore{Store: newStore(t, storeEmbedded)}
	logs := &lockedLog{}
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")}, withStore(store), func(o *gateway.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	store.down.Store(true)
	for range 3 {
		if r := h.get("/readyz", ""); r.status != 503 {
			t.Fatalf("/readyz with the store hanging: %d", r.status)
		}
	}
	store.mu.Lock()
	for _, d := range store.deadlines {
		if d > 500*time.Millisecond {
			t.Fatalf("a readiness ping was allowed %v, want at most 500ms", d)
		}
	}
	store.mu.Unlock()
	if n := logs.count("not ready"); n != 1 {
		t.Fatalf("%d 'not ready' lines for three failed probes, want 1:\n%s", n, logs.buf.String())
	}
	store.down.Store(false)
	for range 3 {
		if r := h.get("/readyz", ""); r.status != 200 {
			t.Fatalf("/readyz with the store back: %d", r.status)
		}
	}
	if n := logs.count("ready again"); n != 1 {
		t.Fatalf("%d 'ready again' lines, want 1", n)
	}
}
