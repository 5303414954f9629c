package idempotency

import (
	"context"
	"time"
)

// Sweeper runs a store's sweep in the background until Stop: the embedded
// and PostgreSQL stores each keep one. An expired record counts as absent
// everywhere, so a sweep only reclaims space, and one that fails (the
// database is down) is simply tried again at the next tick.
type Sweeper struct {
	stop context.CancelFunc
	done chan struct{}
}

// StartSweeper calls sweep every interval until Stop; an interval of 0
// means fallback, a negative one no background sweep at all. sweep reports
// (or ignores) its own errors; its context ends at Stop.
func StartSweeper(interval, fallback time.Duration, sweep func(context.Context)) *Sweeper {
	if interval == 0 {
		interval = fallback
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sweeper{stop: cancel, done: make(chan struct{})}
	if interval < 0 {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				sweep(ctx)
			}
		}
	}()
	return s
}

// Stop ends the sweeper and waits for a sweep under way to return. It is
// safe to call twice.
func (s *Sweeper) Stop() {
	s.stop()
	<-s.done
}
