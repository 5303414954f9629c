package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for the zero fields of [Config].
const (
	DefaultQueueSize      = 256
	DefaultWorkers        = 2
	DefaultMaxAttempts    = 6
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
	DefaultAttemptTimeout = 10 * time.Second
)

// Errors [Notifier.Notify] returns when it does not enqueue.
var (
	// ErrQueueFull: the queue is full; the notification is dropped and
	// counted in [Stats.Dropped].
	ErrQueueFull = errors.New("notify: queue full, notification dropped")
	// ErrClosed: [Notifier.Close] was called; also counted as dropped.
	ErrClosed = errors.New("notify: notifier closed, notification dropped")
)

// Config configures a [Notifier]; only URL and Secret are required.
type Config struct {
	// URL receives the POSTs.
	URL string
	// Secret keys the HMAC of [SignatureHeader].
	Secret []byte
	// ConsoleBaseURL, when set, makes each body link the approval's
	// console page (see [ConsoleURL]).
	ConsoleBaseURL string
	// QueueSize bounds the notifications waiting to be sent.
	QueueSize int
	// Workers is how many notifications are sent at once.
	Workers int
	// MaxAttempts bounds the attempts per notification, the first included.
	MaxAttempts uint
	// InitialBackoff is the wait before the first retry; it doubles per
	// retry, with ±50% jitter, up to MaxBackoff.
	InitialBackoff, MaxBackoff time.Duration
	// AttemptTimeout bounds one attempt, response included.
	AttemptTimeout time.Duration
	// Client sends the requests; nil is an [http.Client] that does not
	// follow redirects (a redirected POST may arrive as a GET without its
	// body: a 3xx is a final answer instead).
	Client *http.Client
	// Logger records notifications given up; nil discards.
	Logger *slog.Logger
}

// Stats counts what a [Notifier] did, for metrics.
type Stats struct {
	// Delivered notifications got a 2xx answer.
	Delivered uint64
	// Failed notifications were given up: attempts exhausted, a final
	// status, or cancelled by [Notifier.Close].
	Failed uint64
	// Dropped notifications were never attempted: the queue was full or
	// the notifier closed.
	Dropped uint64
	// Retries counts attempts after a notification's first.
	Retries uint64
}

// Notifier sends [Pending] notifications in the background; it is safe for
// concurrent use. Create it with [New] and stop it with [Notifier.Close].
type Notifier struct {
	cfg    Config
	queue  chan message
	ctx    context.Context // cancelled when Close gives up draining
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.RWMutex // guards closed against a send on the closed queue
	closed bool

	delivered, failed, dropped, retries atomic.Uint64
}

// message is one encoded notification.
type message struct {
	approvalID string
	body       []byte
}

// New checks cfg, fills in its defaults and starts the workers.
func New(cfg Config) (*Notifier, error) {
	if cfg.URL == "" {
		return nil, errors.New("notify: URL missing")
	}
	if len(cfg.Secret) == 0 {
		return nil, errors.New("notify: secret missing (notifications are always signed)")
	}
	cfg = withDefaults(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{cfg: cfg, queue: make(chan message, cfg.QueueSize), ctx: ctx, cancel: cancel}
	for range cfg.Workers {
		n.wg.Go(n.work)
	}
	return n, nil
}

// withDefaults fills cfg's zero fields.
func withDefaults(cfg Config) Config {
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = DefaultInitialBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// Notify enqueues p and returns at once, whatever the receiver does. It
// returns [ErrQueueFull] or [ErrClosed] when p is dropped, or an error when
// p cannot be encoded (CanonicalArguments not JSON).
func (n *Notifier) Notify(p Pending) error {
	b, err := body(p, n.cfg.ConsoleBaseURL)
	if err != nil {
		return err
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		n.dropped.Add(1)
		return ErrClosed
	}
	select {
	case n.queue <- message{approvalID: p.ApprovalID, body: b}:
		return nil
	default:
		n.dropped.Add(1)
		return ErrQueueFull
	}
}

// Close stops accepting notifications and waits for the queued ones to be
// sent until ctx ends; then it cancels the attempts in flight, drops what
// is still queued and returns ctx's error.
func (n *Notifier) Close(ctx context.Context) error {
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		close(n.queue)
	}
	n.mu.Unlock()
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
		n.cancel()
		return nil
	case <-ctx.Done():
		n.cancel()
		<-done
		return fmt.Errorf("notify: close: %w", ctx.Err())
	}
}

// Stats returns the counts so far.
func (n *Notifier) Stats() Stats {
	return Stats{
		Delivered: n.delivered.Load(),
		Failed:    n.failed.Load(),
		Dropped:   n.dropped.Load(),
		Retries:   n.retries.Load(),
	}
}
