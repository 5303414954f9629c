package benchtool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// Mode is what the load sends.
type Mode string

// Load modes.
const (
	// ModeFresh sends every request as a new agent step: each one claims,
	// runs the tool and records its outcome.
	ModeFresh Mode = "fresh"
	// ModeReplay resends the steps of a pool executed during Prepare: each
	// request is a retry that the gateway answers from the store.
	ModeReplay Mode = "replay"
	// ModeDup sends K identical requests per step at once: exactly one of
	// them may run the tool.
	ModeDup Mode = "dup"
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeFresh, ModeReplay, ModeDup:
		return m, nil
	}
	return "", fmt.Errorf("benchtool: mode %q: want fresh, replay or dup", s)
}

// LoadConfig configures a Load.
type LoadConfig struct {
	// URLs are base URLs (scheme://host:port); requests are spread over
	// them, and in dup mode the copies of one step go to different URLs.
	URLs []string
	// Tool is the tool called (default DefaultToolName).
	Tool string
	Mode Mode
	// Workers is the number of requests in flight (default 32). In dup
	// mode they form Workers/DupK groups, each sending one step at a time.
	Workers int
	// DupK is the number of identical requests per step in dup mode (default 4).
	DupK int
	// PoolSize is the number of steps replay mode resends (default 1000).
	PoolSize int
	// PayloadBytes is the length of the payload string in the arguments (default 64).
	PayloadBytes int
	// PreferWait, when positive, sends Prefer: wait=N in dup mode so the
	// copies that lose the race wait for the outcome instead of getting 409.
	PreferWait int
	// Rate, when positive, caps the requests started per second (in dup
	// mode, steps per second), so the gateway and the baseline can be
	// compared at the same throughput, below saturation, where latency is
	// the work a request costs rather than the queue in front of it.
	Rate float64
	// API is the gateway API the load calls (default APIREST): REST posts
	// to /api/tools/v1/{tool} with the identity in headers; APIMCP sends
	// each request as one raw JSON-RPC tools/call POST to /mcp with the
	// identity in params._meta (mcpload.go).
	API API
	// MCPProtocolVersion is the protocol version of the MCP requests
	// (default DefaultMCPProtocolVersion).
	MCPProtocolVersion string
	// NoIdempotency: the target is a plain MCP server, whose results carry
	// no executionId or replayed flag to verify.
	NoIdempotency bool
	// BearerTokens, when set, are the callers' access tokens: sending
	// slot i sends Authorization: Bearer BearerTokens[i mod len], so each
	// worker is one agent with a token of its own.
	BearerTokens []string
	// Client defaults to NewClient(Workers).
	Client *http.Client
}

// NewClient returns an HTTP client that keeps one idle keep-alive
// connection per worker.
func NewClient(workers int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        workers * 2,
		MaxIdleConnsPerHost: workers * 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// Load generates requests against one target (one set of URLs). Its steps
// never repeat across runs except in replay mode, whose pool is the point.
type Load struct {
	cfg     LoadConfig
	runID   string
	payload string

	mu       sync.Mutex
	nextStep []uint64 // per worker (fresh) or group (dup)
	pool     []*request
	dupKeys  []string
}

// request is one prepared call.
type request struct {
	path    string
	body    []byte
	key     string
	session string
	step    string
	index   uint64
}

// NewLoad checks cfg and fills its defaults.
func NewLoad(cfg LoadConfig) (*Load, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("benchtool: load: no URL")
	}
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return nil, err
	}
	cfg.API = API(orString(string(cfg.API), string(APIREST)))
	if _, err := ParseAPI(string(cfg.API)); err != nil {
		return nil, err
	}
	cfg.Tool = orString(cfg.Tool, DefaultToolName)
	cfg.MCPProtocolVersion = orString(cfg.MCPProtocolVersion, DefaultMCPProtocolVersion)
	cfg.Workers = orInt(cfg.Workers, 32)
	cfg.DupK = orInt(cfg.DupK, 4)
	cfg.PoolSize = orInt(cfg.PoolSize, 1000)
	cfg.PayloadBytes = orInt(cfg.PayloadBytes, 64)
	if cfg.Client == nil {
		cfg.Client = NewClient(cfg.Workers)
	}
	for i, u := range cfg.URLs {
		cfg.URLs[i] = strings.TrimSuffix(u, "/")
	}
	return &Load{
		cfg:      cfg,
		runID:    "bench-" + randomHex(6),
		payload:  strings.Repeat("x", cfg.PayloadBytes),
		nextStep: make([]uint64, max(cfg.Workers, 1)),
	}, nil
}

// Config returns the effective configuration.
func (l *Load) Config() LoadConfig { return l.cfg }

// newRequest builds the call of one step, with its derived key, as an agent
// runtime would: canonical arguments, key = SHA-256(session:step:tool:JCS).
func (l *Load) newRequest(session string, step uint64) (*request, error) {
	args := `{"op":"bench","payload":"` + l.payload + `","seq":` + strconv.FormatUint(step, 10) + `}`
	key, canonical, err := keyderive.Derive(session, step, l.cfg.Tool, []byte(args))
	if err != nil {
		return nil, fmt.Errorf("benchtool: derive key: %w", err)
	}
	return &request{
		path: "/api/tools/v1/" + l.cfg.Tool, body: canonical, key: key,
		session: session, step: strconv.FormatUint(step, 10), index: step,
	}, nil
}

// Prepare readies the load: in replay mode it executes every step of the
// pool once, so the measured requests are all retries.
func (l *Load) Prepare(ctx context.Context) error {
	if l.cfg.Mode != ModeReplay || len(l.pool) > 0 {
		return nil
	}
	pool := make([]*request, l.cfg.PoolSize)
	for i := range pool {
		r, err := l.newRequest(l.runID+"-pool", uint64(i))
		if err != nil {
			return err
		}
		pool[i] = r
	}
	jobs := make(chan int)
	errs := make(chan error, l.cfg.Workers)
	var wg sync.WaitGroup
	for range l.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				send := l.urlSender(l.cfg.URLs[i%len(l.cfg.URLs)], l.authorization(i))
				status, _, err := send(ctx, pool[i])
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("status %d", status)
				}
				if err != nil {
					errs <- fmt.Errorf("benchtool: warm replay pool, step %d: %w", i, err)
					return
				}
			}
		}()
	}
	var failed error
feed:
	for i := range pool {
		select {
		case jobs <- i:
		case failed = <-errs:
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if failed == nil && len(errs) > 0 {
		failed = <-errs
	}
	if failed != nil {
		return failed
	}
	l.pool = pool
	return nil
}

// Run sends requests for d (requests in flight at the end are awaited and
// counted) and returns what it measured. RoundTrips is left unknown.
func (l *Load) Run(ctx context.Context, d time.Duration) (*Result, error) {
	if l.cfg.Mode == ModeReplay && len(l.pool) == 0 {
		return nil, errors.New("benchtool: replay mode: Prepare first")
	}
	start := time.Now()
	stop := start.Add(d)
	runCtx, cancel := context.WithDeadline(ctx, stop)
	defer cancel()
	tokens := pace(runCtx, l.cfg.Rate)
	running := func() bool {
		if tokens != nil {
			select {
			case <-tokens:
			case <-runCtx.Done():
				return false
			}
		}
		return ctx.Err() == nil && time.Now().Before(stop)
	}

	loops := l.cfg.Workers
	if l.cfg.Mode == ModeDup {
		loops = max(1, l.cfg.Workers/l.cfg.DupK)
	}
	results := make([]*Result, loops)
	errs := make([]error, loops)
	var wg sync.WaitGroup
	for i := range loops {
		results[i] = newResult()
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch l.cfg.Mode {
			case ModeFresh:
				errs[i] = l.freshLoop(ctx, i, results[i], running)
			case ModeReplay:
				errs[i] = l.replayLoop(ctx, i, results[i], running)
			case ModeDup:
				errs[i] = l.dupLoop(ctx, i, results[i], running)
			}
		}()
	}
	wg.Wait()
	total := newResult()
	for _, r := range results {
		total.Merge(r)
	}
	total.Elapsed = time.Since(start)
	return total, errors.Join(errs...)
}

// pace returns a channel that yields rate tokens per second until ctx
// ends, or nil (no limit) when rate is not positive. A small buffer
// absorbs timer jitter; beyond it tokens not taken are dropped, so a target
// that fell behind is not flooded with a backlog afterwards.
func pace(ctx context.Context, rate float64) <-chan struct{} {
	if rate <= 0 {
		return nil
	}
	tokens := make(chan struct{}, 8)
	interval := time.Duration(float64(time.Second) / rate)
	go func() {
		next := time.Now()
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			for now := time.Now(); !next.After(now); next = next.Add(interval) {
				select {
				case tokens <- struct{}{}:
				default: // the buffer is full: the target is behind; skip the slot
				}
			}
			timer.Reset(time.Until(next))
		}
	}()
	return tokens
}

func (l *Load) takeStep(slot int) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	step := l.nextStep[slot]
	l.nextStep[slot]++
	return step
}

func (l *Load) freshLoop(ctx context.Context, worker int, res *Result, running func() bool) error {
	session := l.runID + "-w" + strconv.Itoa(worker)
	send := l.sender(worker)
	for running() {
		r, err := l.newRequest(session, l.takeStep(worker))
		if err != nil {
			return err
		}
		timed(ctx, send, r, res)
	}
	return nil
}

func (l *Load) replayLoop(ctx context.Context, worker int, res *Result, running func() bool) error {
	send := l.sender(worker)
	rng := rand.New(rand.NewPCG(uint64(worker), uint64(time.Now().UnixNano())))
	for running() {
		timed(ctx, send, l.pool[rng.IntN(len(l.pool))], res)
	}
	return nil
}

// dupLoop sends DupK copies of each step at once, spread over the URLs.
func (l *Load) dupLoop(ctx context.Context, group int, res *Result, running func() bool) error {
	session := l.runID + "-g" + strconv.Itoa(group)
	copies := make([]*Result, l.cfg.DupK)
	senders := make([]sendFunc, l.cfg.DupK)
	for j := range senders {
		senders[j] = l.sender(group*l.cfg.DupK + j)
	}
	for running() {
		r, err := l.newRequest(session, l.takeStep(group))
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		for j := range copies {
			copies[j] = newResult()
			wg.Add(1)
			go func() {
				defer wg.Done()
				timed(ctx, senders[j], r, copies[j])
			}()
		}
		wg.Wait()
		for _, c := range copies {
			res.Merge(c)
		}
		l.mu.Lock()
		l.dupKeys = append(l.dupKeys, r.key)
		l.mu.Unlock()
	}
	return nil
}

// DupKeys returns the key of every step dup mode has sent.
func (l *Load) DupKeys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.dupKeys...)
}

// sendFunc sends one prepared call and reports its answer: the HTTP status
// (REST) or the MCP outcome's status (see Result.Statuses), and whether it
// was a replay. An error means no answer at all.
type sendFunc func(ctx context.Context, r *request) (status int, replayed bool, err error)

// sender returns how sending slot i (a worker, or copy j of dup group g as
// slot g*DupK+j) sends: to the URL of the slot, over the load's API. In
// dup mode the copies of one step go to different URLs.
func (l *Load) sender(slot int) sendFunc {
	return l.urlSender(l.slotURL(slot), l.authorization(slot))
}

// authorization is the Authorization header sending slot i sends ("":
// none).
func (l *Load) authorization(slot int) string {
	if len(l.cfg.BearerTokens) == 0 {
		return ""
	}
	return "Bearer " + l.cfg.BearerTokens[slot%len(l.cfg.BearerTokens)]
}

// urlSender sends to url over the load's API, with the Authorization
// header auth unless it is "".
func (l *Load) urlSender(url, auth string) sendFunc {
	if l.cfg.API == APIMCP {
		return l.mcpSender(url, auth)
	}
	return l.restSender(url, auth)
}

// slotURL is the URL sending slot i talks to.
func (l *Load) slotURL(slot int) string {
	if l.cfg.Mode == ModeDup {
		group, j := slot/l.cfg.DupK, slot%l.cfg.DupK
		return l.cfg.URLs[(group+j)%len(l.cfg.URLs)]
	}
	return l.cfg.URLs[slot%len(l.cfg.URLs)]
}

// timed sends r and records the answer and its latency.
func timed(ctx context.Context, send sendFunc, r *request, res *Result) {
	start := time.Now()
	status, replayed, err := send(ctx, r)
	if err != nil {
		res.Errors++
		return
	}
	res.record(status, replayed, time.Since(start))
}

// restSender posts to url and reads the whole answer, so the connection is
// reused.
func (l *Load) restSender(url, auth string) sendFunc {
	return func(ctx context.Context, r *request) (int, bool, error) {
		return l.sendREST(ctx, url, auth, r)
	}
}

// sendREST posts r to url with the identity in headers.
func (l *Load) sendREST(ctx context.Context, url, auth string, r *request) (status int, replayed bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+r.path, bytes.NewReader(r.body))
	if err != nil {
		return 0, false, fmt.Errorf("benchtool: build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.HeaderIdempotencyKey, r.key)
	req.Header.Set(wire.HeaderSessionID, r.session)
	req.Header.Set(wire.HeaderStepIndex, r.step)
	if auth != "" {
		req.Header.Set(wire.HeaderAuthorization, auth)
	}
	if l.cfg.Mode == ModeDup && l.cfg.PreferWait > 0 {
		req.Header.Set(wire.HeaderPrefer, "wait="+strconv.Itoa(l.cfg.PreferWait))
	}
	resp, err := l.cfg.Client.Do(req)
	if err != nil {
		return 0, false, fmt.Errorf("benchtool: send: %w", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, false, fmt.Errorf("benchtool: read answer: %w", err)
	}
	return resp.StatusCode, resp.Header.Get(wire.HeaderReplayed) == "true", nil
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orInt(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}
