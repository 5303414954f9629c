package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// balancer sends every HTTP attempt to a random replica: the SDK retries a
// refused connection (a killed replica) and the next attempt likely lands
// on a live one.
type balancer struct {
	addrs    []string
	base     http.RoundTripper
	attempts atomic.Int64

	mu  sync.Mutex
	rng *rand.Rand
}

// RoundTrip implements http.RoundTripper.
func (b *balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	addr := b.addrs[b.rng.IntN(len(b.addrs))]
	b.mu.Unlock()
	b.attempts.Add(1)
	out := req.Clone(req.Context())
	out.URL.Host, out.Host = addr, ""
	return b.base.RoundTrip(out)
}

// answerKind classifies what a step ended with.
type answerKind string

const (
	answerResult     answerKind = "result"          // the tool's outcome, executed or replayed
	answerUnknown    answerKind = "outcome_unknown" // 409: the running gateway died (lease_expiry: unknown)
	answerUnexpected answerKind = "unexpected"      // any other final error: a violation
	answerLost       answerKind = "lost"            // no final answer within the step deadline
)

// answer is one final answer to a step.
type answer struct {
	Kind        answerKind
	Status      int
	Body        string
	ExecutionID string
	Replayed    bool
	Detail      string
}

func (a answer) sameAs(b answer) bool {
	return a.Kind == b.Kind && a.Status == b.Status && a.Body == b.Body && a.ExecutionID == b.ExecutionID
}

// step is one agent step and every final answer it got.
type step struct {
	Agent   int
	Session string
	Index   uint64
	Tool    string
	Args    []byte
	Key     string
	Answers []answer
}

// agent runs steps one after the other until stop, each step to a final
// answer, then replays it cfg.Replays times.
type agent struct {
	id      int
	session *agentclient.Session
	cfg     Config
	rng     *rand.Rand
	steps   []*step
}

func (a *agent) run(ctx context.Context, stop time.Time) {
	for index := uint64(0); time.Now().Before(stop) && ctx.Err() == nil; index++ {
		tool := toolRerun
		if a.rng.IntN(3) == 0 {
			tool = toolUnknown
		}
		s := &step{Agent: a.id, Session: a.session.ID(), Index: index, Tool: tool,
			Args: fmt.Appendf(nil, `{"agent":%d,"step":%d,"amount":%d}`, a.id, index, a.rng.IntN(1000))}
		key, err := keyderive.Key(s.Session, s.Index, s.Tool, s.Args)
		a.steps = append(a.steps, s)
		if err != nil { // cannot happen: the arguments are a JSON object
			s.Answers = append(s.Answers, answer{Kind: answerUnexpected, Detail: err.Error()})
			return
		}
		s.Key = key
		for range 1 + a.cfg.Replays {
			ans := a.final(ctx, s)
			s.Answers = append(s.Answers, ans)
			if ans.Kind == answerLost || ans.Kind == answerUnexpected {
				break
			}
		}
	}
}

// final calls the step until it gets a final answer or its deadline passes.
// The SDK retries network errors, 409 request_in_progress and 502/503/504
// itself; a retryable 500 (the gateway lost its lease mid-tool) is retried
// here, as the contract's retryable flag allows.
func (a *agent) final(ctx context.Context, s *step) answer {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.StepDeadline)
	defer cancel()
	for {
		res, err := a.session.Call(ctx, s.Index, s.Tool, s.Args)
		if err == nil {
			return answer{Kind: answerResult, Status: res.Status, Body: string(bytes.TrimSpace(res.Body)),
				ExecutionID: res.ExecutionID, Replayed: res.Replayed}
		}
		var problem *agentclient.Error
		switch {
		case errors.As(err, &problem) && problem.Code == wire.CodeOutcomeUnknown:
			return answer{Kind: answerUnknown, Status: problem.Status}
		case ctx.Err() != nil:
			return answer{Kind: answerLost, Detail: err.Error()}
		case errors.As(err, &problem) && problem.Retryable:
			if sleepCtx(ctx, 50*time.Millisecond) != nil {
				return answer{Kind: answerLost, Detail: err.Error()}
			}
		default:
			return answer{Kind: answerUnexpected, Detail: err.Error()}
		}
	}
}

// verify sends every step once more after the faults stopped.
func (a *agent) verify(ctx context.Context) {
	for _, s := range a.steps {
		s.Answers = append(s.Answers, a.final(ctx, s))
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
