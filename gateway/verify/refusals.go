package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolgateway/toolgateway/gateway/decide"
)

// refusals is what verify saw the scratch gateways refuse without running
// anything: an answer 503 (the store did not take the call: a credential
// that may only read, a store down) proves nothing about a guarantee, so
// a guarantee that met one is N/A, never a PASS or a FAIL. It also keeps
// the last store error the scratch gateways logged, the store's own
// message.
type refusals struct {
	unavailable atomic.Int64
	mu          sync.Mutex
	last        string // the last 503 answer, "503 <code>: <detail>"
	storeErr    string // the last store error the scratch gateways logged
	storeErrs   int64  // how many they logged
}

// refusalMark is where refusals stood when a guarantee started.
type refusalMark struct{ unavailable, storeErrs int64 }

// mark is where r stands now.
func (r *refusals) mark() refusalMark {
	r.mu.Lock()
	defer r.mu.Unlock()
	return refusalMark{r.unavailable.Load(), r.storeErrs}
}

// saw notes an answer of a scratch gateway.
func (r *refusals) saw(resp answer) {
	if resp.status != http.StatusServiceUnavailable {
		return
	}
	r.unavailable.Add(1)
	var p struct{ Code, Detail string }
	_ = json.Unmarshal(resp.body, &p)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = fmt.Sprintf("503 %s: %s", p.Code, p.Detail)
}

// since says why a guarantee that started at mark is N/A ("" when no
// call was answered 503 since), with the store's message if it logged
// one since.
func (r *refusals) since(mark refusalMark) string {
	n := r.unavailable.Load() - mark.unavailable
	if n == 0 {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	why := fmt.Sprintf("not exercised: %d call(s) answered %s", n, r.last)
	if r.storeErrs > mark.storeErrs {
		why += "; the store said: " + r.storeErr
	}
	return why
}

// storeMessage is the last error the scratch gateways logged.
func (r *refusals) storeMessage() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.storeErr
}

// logHandler keeps the error of every ERROR record about the store that
// the scratch gateways log ("store claim failed", ...: the store's message
// when it refused a call); it prints nothing.
type logHandler struct{ r *refusals }

func (h logHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }

func (h logHandler) Handle(_ context.Context, rec slog.Record) error {
	if !strings.Contains(rec.Message, "store") {
		return nil // a tool's failure, say: not the store's word
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key != "error" {
			return true
		}
		h.r.mu.Lock()
		h.r.storeErr = rec.Message + ": " + a.Value.String()
		h.r.storeErrs++
		h.r.mu.Unlock()
		return false
	})
	return nil
}

func (h logHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logHandler) WithGroup(string) slog.Handler      { return h }

// probeWrites makes one call of t, a tool that stores records, on the
// scratch gateway before any guarantee runs: a store that does not take
// it (a read-only credential: every call 503) is an error naming the
// store and with its own message, instead of guarantees run on refusals.
func probeWrites(ctx context.Context, env *scratchEnv, desc string, t *checkedTool) error {
	if t == nil {
		return nil
	}
	args, _, err := t.freshArgs(ctx, env)
	if err != nil {
		return nil // the guarantees say N/A for this tool themselves
	}
	resp, err := env.call(ctx, toolCall{tool: t.name, session: env.session(), step: 1, args: args})
	if err != nil {
		return fmt.Errorf("verify: a first call of %s on %s: %w", t.name, desc, err)
	}
	if resp.status != http.StatusServiceUnavailable {
		return nil
	}
	msg := env.refused.storeMessage()
	if msg == "" {
		msg = string(resp.body)
	}
	return fmt.Errorf("verify: store %s does not take writes (a first call of %s answered 503, nothing ran); give verify a credential that may write there: %s", desc, t.name, msg)
}

// maxAllowedTries bounds the argument seeds allowedArgs tries.
const maxAllowedTries = 64

// allowedArgs are fresh arguments (and other arguments) that t's decide
// rules, if it has any, allow, as the rules themselves say:
// verify makes no call the rules would refuse. The error names the rule
// that refused the last arguments tried. Fresh calls get ever larger
// seeds, so after the first it tries the smallest seeds no call used.
func allowedArgs(ctx context.Context, env *scratchEnv, t *checkedTool) (args, other []byte, err error) {
	policy := env.opts.Decisions[t.name]
	if policy.Rules() == 0 {
		return argsFor(t.entry, env.seed())
	}
	var refusal string
	seed := env.seed()
	for range maxAllowedTries {
		args, other, err := argsFor(t.entry, seed)
		if err != nil {
			return nil, nil, err
		}
		allowed := true
		for _, a := range [][]byte{args, other} {
			v, _ := policy.Decide(ctx, &decide.Input{Arguments: a, Tenant: env.tenantName(0), Session: "verify", Step: 1, HasStep: true, API: "rest"})
			if v.Decision != decide.Allow {
				allowed = false
				rule := "no rule matched"
				if v.Rule >= 0 {
					rule = fmt.Sprintf("decide rule %d", v.Rule+1)
				}
				refusal = fmt.Sprintf("%s decides %s for %s: %s", rule, v.Decision, a, v.Reason)
				break
			}
		}
		if allowed {
			return args, other, nil
		}
		next, ok := env.unusedSeed()
		if !ok {
			break
		}
		seed = next
	}
	return nil, nil, fmt.Errorf("none of the arguments verify made is allowed by %s's decide rules (%s)", t.name, refusal)
}
