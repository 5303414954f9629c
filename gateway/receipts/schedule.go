package receipts

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Scheduler signs chains' heads off the call path: a chain is
// checkpointed once it has Every receipts more than at its last
// checkpoint, or Interval after the first receipt since it — whichever
// comes first (receipts.checkpoint_every). It learns of receipts through
// the store [Scheduler.Store] wraps, so the writer that appends them
// needs nothing else.
type Scheduler struct {
	Checkpointer Checkpointer
	// Every and Interval are checkpoint_every (0: not by that measure).
	Every    int
	Interval time.Duration
	Log      *slog.Logger

	mu      sync.Mutex
	pending map[string]pendingChain
	wake    chan struct{}
}

// pendingChain is a chain's receipts not yet checkpointed.
type pendingChain struct {
	count int
	since time.Time // the first of them was appended
}

// NewScheduler returns a scheduler; start it with Run.
func NewScheduler(cp Checkpointer, every int, interval time.Duration, log *slog.Logger) *Scheduler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{Checkpointer: cp, Every: every, Interval: interval, Log: log,
		pending: map[string]pendingChain{}, wake: make(chan struct{}, 1)}
}

// appended notes n receipts appended to tenant's chain; it never blocks.
func (s *Scheduler) appended(tenant string, n int) {
	s.mu.Lock()
	p := s.pending[tenant]
	if p.count == 0 {
		p.since = time.Now()
	}
	p.count += n
	s.pending[tenant] = p
	due := s.Every > 0 && p.count >= s.Every
	s.mu.Unlock()
	if due {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// due takes the chains to checkpoint now.
func (s *Scheduler) due(now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var tenants []string
	for tenant, p := range s.pending {
		if (s.Every > 0 && p.count >= s.Every) || (s.Interval > 0 && now.Sub(p.since) >= s.Interval) {
			tenants = append(tenants, tenant)
			delete(s.pending, tenant)
		}
	}
	slices.Sort(tenants)
	return tenants
}

// Run checkpoints the chains that are due until ctx ends; a chain it
// fails to checkpoint is logged (at error level for a chain that diverged
// from its checkpoint: a rollback or a rewrite) and tried again with its
// next receipts.
func (s *Scheduler) Run(ctx context.Context) {
	tick := s.Interval / 4
	if tick <= 0 || tick > time.Second*15 {
		tick = time.Second * 15
	}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-s.wake:
		}
		for _, tenant := range s.due(time.Now()) {
			s.checkpoint(ctx, tenant)
		}
	}
}

// checkpointTimeout bounds one checkpoint (the store, the TSA).
const checkpointTimeout = time.Minute

func (s *Scheduler) checkpoint(ctx context.Context, tenant string) {
	ctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
	defer cancel()
	c, _, err := s.Checkpointer.Checkpoint(ctx, tenant)
	switch {
	case errors.Is(err, ErrChainDiverged):
		s.Log.ErrorContext(ctx, "receipts: chain diverged from its checkpoint; not signed", "tenant", tenant, "error", err)
	case err != nil:
		s.Log.WarnContext(ctx, "receipts: checkpoint failed", "tenant", tenant, "seq", c.Seq, "error", err)
	}
}

// Flush checkpoints every chain with receipts since its last checkpoint,
// whether due or not: what a gateway does as it stops, after its last
// receipts were written.
func (s *Scheduler) Flush(ctx context.Context) {
	s.mu.Lock()
	tenants := make([]string, 0, len(s.pending))
	for tenant := range s.pending {
		tenants = append(tenants, tenant)
	}
	clear(s.pending)
	s.mu.Unlock()
	slices.Sort(tenants)
	for _, tenant := range tenants {
		s.checkpoint(ctx, tenant)
	}
}

// Now checkpoints tenant's chain (every chain when tenant is ""), now:
// what POST /admin/v1/receipts/checkpoints does. It answers the chains'
// latest checkpoints; the first error stops it.
func (s *Scheduler) Now(ctx context.Context, tenant string) ([]Checkpoint, error) {
	tenants := []string{tenant}
	if tenant == "" {
		var err error
		if tenants, err = s.Checkpointer.Store.Tenants(ctx); err != nil {
			return nil, err
		}
	}
	var out []Checkpoint
	for _, t := range tenants {
		c, _, err := s.Checkpointer.Checkpoint(ctx, t)
		if err != nil {
			return out, err
		}
		if c.Seq > 0 {
			out = append(out, c)
		}
		s.mu.Lock()
		delete(s.pending, t)
		s.mu.Unlock()
	}
	return out, nil
}

// Store wraps st so that every receipt appended through it counts toward
// its chain's next checkpoint.
func (s *Scheduler) Store(st Store) Store { return scheduledStore{Store: st, s: s} }

type scheduledStore struct {
	Store
	s *Scheduler
}

func (w scheduledStore) Append(ctx context.Context, tenant string, r Receipt) (Receipt, error) {
	sealed, err := w.Store.Append(ctx, tenant, r)
	if err == nil {
		w.s.appended(tenant, 1)
	}
	return sealed, err
}

func (w scheduledStore) AppendRun(ctx context.Context, tenant string, rs []Receipt) ([]Receipt, error) {
	run, err := w.Store.AppendRun(ctx, tenant, rs)
	if err == nil && len(run) > 0 {
		w.s.appended(tenant, len(run))
	}
	return run, err
}
