package receipts_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// memLog is an in-memory compare-and-append whose appends can be held, to
// see the Appender's turn-taking and retries.
type memLog struct {
	mu      sync.Mutex
	heads   map[string]receipts.Head
	lines   map[string][][]byte
	calls   int
	hold    chan struct{} // when set, every call says so on entered and waits for hold to close
	entered chan struct{}
}

func newMemLog() *memLog {
	return &memLog{heads: map[string]receipts.Head{}, lines: map[string][][]byte{}}
}

func (m *memLog) CompareAndAppend(ctx context.Context, tenant string, expected receipts.Head, run []receipts.Sealed) (receipts.Head, error) {
	if m.hold != nil {
		m.entered <- struct{}{}
		<-m.hold
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if cur := m.heads[tenant]; cur != expected {
		return cur, receipts.ErrHeadMoved
	}
	for _, s := range run {
		m.heads[tenant] = receipts.HeadOf(s.Receipt)
		m.lines[tenant] = append(m.lines[tenant], s.Line)
	}
	return m.heads[tenant], nil
}

func TestAppenderRetriesAfterAnotherReplica(t *testing.T) {
	log := newMemLog()
	a, b := receipts.NewAppender(log, nil), receipts.NewAppender(log, nil)
	ctx := t.Context()
	for i := range 3 {
		if _, err := a.Append(ctx, "acme", sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	log.calls = 0
	r, err := b.Append(ctx, "acme", sample(3)) // b has never seen the head
	if err != nil || r.Seq != 4 || log.calls != 2 {
		t.Fatalf("seq %d after %d calls, %v; want seq 4 after 2", r.Seq, log.calls, err)
	}
	log.calls = 0
	if r, err = a.Append(ctx, "acme", sample(4)); err != nil || r.Seq != 5 || log.calls != 2 {
		t.Fatalf("seq %d after %d calls, %v; want seq 5 after 2", r.Seq, log.calls, err)
	}
	if r.Time.IsZero() || r.Tenant != "acme" {
		t.Errorf("time %v tenant %q", r.Time, r.Tenant)
	}
}

// An append waiting for its turn gives up with its context and writes
// nothing.
func TestAppenderWaitRespectsContext(t *testing.T) {
	log := newMemLog()
	log.hold, log.entered = make(chan struct{}), make(chan struct{}, 1)
	a := receipts.NewAppender(log, nil)
	first := make(chan error, 1)
	go func() {
		_, err := a.Append(context.Background(), "acme", sample(1))
		first <- err
	}()
	<-log.entered // the first append holds the turn
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := a.Append(ctx, "acme", sample(2)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second append: %v, want the context's deadline", err)
	}
	close(log.hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := len(log.lines["acme"]); n != 1 {
		t.Fatalf("%d receipts written, want 1", n)
	}
}
