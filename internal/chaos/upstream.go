package chaos

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgateway/toolgateway/wire"
)

// replicaHeader is the static upstream header each gateway's config sets,
// so the upstream knows which replica ran an execution.
const replicaHeader = "X-Gateway-Replica"

// execution is one run of the tool, as the upstream saw it.
type execution struct {
	Tool, Key, Replica, ExecutionID string
	Fence                           int64
	Start, End                      time.Time
	// Aborted: the gateway hung up before the answer (it died, it
	// cancelled the tool after losing its lease or at its timeout, or this
	// upstream dropped the connection).
	Aborted bool
	// Uncertain: this upstream made the outcome uncertain on purpose: it
	// took longer than the tool's timeout, or dropped the connection after
	// reading the request.
	Uncertain bool
}

// Uncertain outcomes the upstream injects when asked to (Config.Uncertain).
const (
	// uncertainShare of the calls outlive the tool's timeout (toolTimeout),
	// as many again are dropped unanswered.
	uncertainShare = 0.03
	// slowCall is how long an outliving call takes.
	slowCall = 1500 * time.Millisecond
)

// upstream is the HTTP tool behind the gateways: it counts executions per
// Idempotency-Key and takes 20–100 ms, to widen the window in which a
// gateway dies mid-tool. Its answer names the execution, so two
// executions of one key never give the same body.
type upstream struct {
	server    *httptest.Server
	uncertain bool // inject uncertain outcomes
	reconcile bool // give the unknown tool a reconcile: section on this upstream

	mu    sync.Mutex
	byKey map[string][]*execution
	total int
	// refusedUpTo is, per key, the fencing token up to which requests are
	// refused after a not_committed answer (reconcile.go).
	refusedUpTo map[string]int64
	// reconciledCommitted and reconciledNotCommitted count the answers of
	// the reconcile endpoint.
	reconciledCommitted, reconciledNotCommitted int
}

func newUpstream(uncertain bool) *upstream {
	u := &upstream{byKey: map[string][]*execution{}, uncertain: uncertain, refusedUpTo: map[string]int64{}}
	u.server = httptest.NewServer(http.HandlerFunc(u.serve))
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	e := &execution{
		Tool:        strings.TrimPrefix(r.URL.Path, "/"),
		Key:         r.Header.Get(wire.HeaderIdempotencyKey),
		Replica:     r.Header.Get(replicaHeader),
		ExecutionID: r.Header.Get(wire.HeaderExecutionID),
		Start:       time.Now(),
	}
	if isReconcile(r) {
		u.serveReconcile(w, r)
		return
	}
	e.Fence, _ = strconv.ParseInt(r.Header.Get(wire.HeaderFencingToken), 10, 64)
	u.mu.Lock()
	if u.refused(e.Key, e.Fence) {
		u.mu.Unlock()
		http.Error(w, "fencing token refused", http.StatusConflict)
		return
	}
	u.byKey[e.Key] = append(u.byKey[e.Key], e)
	run := len(u.byKey[e.Key])
	u.total++
	u.mu.Unlock()

	duration := time.Duration(20+rand.IntN(81)) * time.Millisecond
	if u.uncertain {
		switch roll := rand.Float64(); {
		case roll < uncertainShare: // read, acted on, never answered
			u.mu.Lock()
			e.Uncertain = true
			u.mu.Unlock()
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close()
			}
			u.finish(e, true)
			return
		case roll < 2*uncertainShare:
			u.mu.Lock()
			e.Uncertain = true
			u.mu.Unlock()
			duration = slowCall
		}
	}
	work := time.NewTimer(duration)
	defer work.Stop()
	select {
	case <-work.C:
	case <-r.Context().Done():
		u.finish(e, true)
		return
	}
	body, _ := json.Marshal(answerBody(e, run))
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(body)
	u.finish(e, err != nil)
}

func (u *upstream) finish(e *execution, aborted bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e.End, e.Aborted = time.Now(), aborted
}

// url is the tool's endpoint.
func (u *upstream) url(tool string) string { return u.server.URL + "/" + tool }

// snapshot returns a copy of the executions per key.
func (u *upstream) snapshot() (map[string][]execution, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string][]execution, len(u.byKey))
	for k, list := range u.byKey {
		for _, e := range list {
			out[k] = append(out[k], *e)
		}
	}
	return out, u.total
}

func (u *upstream) close() { u.server.Close() }
