package mcptool

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Reconnection backoff of a session slot: doubled after every failed
// connection (or a session that died young), capped.
const (
	minBackoff      = 100 * time.Millisecond
	maxBackoff      = 30 * time.Second
	connectTimeout  = 30 * time.Second
	healthyLifetime = 10 * time.Second // a session that lived this long resets the backoff
)

// errNoSession is why a call found no open session: every slot is
// (re)connecting, e.g. the stdio server died and is being restarted.
var errNoSession = errors.New("no open session: the server is not connected (reconnecting with backoff)")

// pool keeps a fixed number of client sessions open to one upstream. Each
// slot has a supervisor goroutine that connects, waits for the session to
// end (the server closed it, the process died, or a call found it broken),
// and connects again with backoff until the pool closes. Calls take the
// open sessions round robin; a session carries many concurrent calls, so a
// pool is a handful of sessions, never one per call.
type pool struct {
	log     *slog.Logger
	connect func(ctx context.Context) (*mcp.ClientSession, error)
	// onConnect runs after every successful connection (a restarted server
	// may offer other tools, so its tools are listed again); onFailure
	// after every failed attempt.
	onConnect func()
	onFailure func()

	slots []*slot
	next  atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// slot holds one session, nil while it is (re)connecting.
type slot struct {
	cur atomic.Pointer[mcp.ClientSession]
}

func newPool(size int, log *slog.Logger, connect func(context.Context) (*mcp.ClientSession, error), onConnect, onFailure func()) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{log: log, connect: connect, onConnect: onConnect, onFailure: onFailure, ctx: ctx, cancel: cancel}
	for range size {
		p.slots = append(p.slots, &slot{})
	}
	return p
}

// start launches the supervisors.
func (p *pool) start() {
	for i, s := range p.slots {
		p.wg.Add(1)
		go p.supervise(i, s)
	}
}

// get returns an open session, or errNoSession.
func (p *pool) get() (*mcp.ClientSession, error) {
	n := uint64(len(p.slots))
	start := p.next.Add(1)
	for i := range n {
		if cs := p.slots[(start+i)%n].cur.Load(); cs != nil {
			return cs, nil
		}
	}
	return nil, errNoSession
}

// broken takes cs out of service after a transport failure; its supervisor
// notices the end of the session and connects a new one.
func (p *pool) broken(cs *mcp.ClientSession) {
	for _, s := range p.slots {
		if s.cur.CompareAndSwap(cs, nil) {
			go func() { _ = cs.Close() }()
			return
		}
	}
}

// connected reports whether any session is open.
func (p *pool) connected() bool {
	_, err := p.get()
	return err == nil
}

// close ends every session (a stdio server is stopped: stdin closed, then
// SIGTERM, then SIGKILL) and waits for the supervisors.
func (p *pool) close() {
	p.cancel()
	p.wg.Wait()
}

// supervise keeps slot s connected until the pool closes.
func (p *pool) supervise(i int, s *slot) {
	defer p.wg.Done()
	delay := minBackoff
	failures := 0
	for p.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(p.ctx, connectTimeout)
		cs, err := p.connect(ctx)
		cancel()
		if err != nil {
			failures++
			if p.onFailure != nil {
				p.onFailure()
			}
			// The first failure is worth a warning; a server that stays down
			// would otherwise fill the log.
			level := slog.LevelDebug
			if failures == 1 || failures%20 == 0 {
				level = slog.LevelWarn
			}
			p.log.Log(p.ctx, level, "mcp server: connect failed; retrying with backoff", "slot", i, "retry_in", delay.String(), "failures", failures, "error", err)
			if !p.sleep(delay) {
				return
			}
			delay = min(2*delay, maxBackoff)
			continue
		}
		if failures > 0 {
			p.log.Info("mcp server: connected", "slot", i, "after_failures", failures)
		}
		failures = 0
		born := time.Now()
		s.cur.Store(cs)
		if p.onConnect != nil {
			p.onConnect()
		}
		ended := make(chan error, 1)
		go func() { ended <- cs.Wait() }()
		select {
		case err := <-ended:
			s.cur.CompareAndSwap(cs, nil)
			_ = cs.Close()
			if p.ctx.Err() != nil {
				return
			}
			p.log.Warn("mcp server: session ended; reconnecting", "slot", i, "lived", time.Since(born).Round(time.Millisecond).String(), "error", err)
		case <-p.ctx.Done():
			s.cur.CompareAndSwap(cs, nil)
			if err := cs.Close(); err != nil {
				p.log.Debug("mcp server: close", "slot", i, "error", err)
			}
			<-ended
			return
		}
		if time.Since(born) >= healthyLifetime {
			delay = minBackoff
		}
		if !p.sleep(delay) {
			return
		}
		delay = min(2*delay, maxBackoff)
	}
}

// sleep waits d, or reports false when the pool closes first.
func (p *pool) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}
