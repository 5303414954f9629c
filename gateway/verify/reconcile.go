package verify

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway/reconcile"
)

// reconcileWait bounds how long verify waits for the reconcile worker to
// complete a record: many times the stand-in's question interval.
const (
	reconcileEvery = 20 * time.Millisecond
	reconcileWait  = 10 * time.Second
)

// committedAsker is the stand-in of a tool's reconcile endpoint: it says
// every call it is asked about committed, with body.
type committedAsker struct {
	body  []byte
	asked atomic.Int64
}

func (a *committedAsker) Ask(context.Context, reconcile.Question, int64) (reconcile.Answer, error) {
	a.asked.Add(1)
	return reconcile.Answer{Outcome: reconcile.OutcomeCommitted, Status: http.StatusOK, Body: a.body}, nil
}

// checkReconcile makes a record UNKNOWN (the stand-in takes the call and
// gives no answer), runs the reconcile worker with the tool's own target
// but a stand-in owner that answers committed, and waits until the call's
// retry replays the committed answer, without the tool running again.
func checkReconcile(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	target, ok := env.reconcile[t.name]
	if !ok {
		return NA, t.name + " has no reconcile section"
	}
	if why, ok := needsRecords(t); !ok {
		return NA, why
	}
	rs, ok := env.store.(reconcile.Store)
	if !ok {
		return NA, "the scratch store offers no reconciliation"
	}
	args, _, err := t.freshArgs(ctx, env)
	if err != nil {
		return NA, err.Error()
	}
	asker := &committedAsker{body: []byte(`{"verify":"committed by reconciliation"}`)}
	target.Ask, target.Every = asker, reconcileEvery
	w, err := reconcile.New(reconcile.Options{Store: rs, Targets: []reconcile.Target{target}, Owner: "verify-reconcile", Registerer: prometheus.NewRegistry()})
	if err != nil {
		return Fail, err.Error()
	}
	c := toolCall{tool: t.name, session: env.session(), step: 1, args: args}
	t.standIn.uncertain.Store(true)
	_, err = env.call(ctx, c)
	t.standIn.uncertain.Store(false)
	if err != nil {
		return Fail, err.Error()
	}
	wctx, stop := context.WithTimeout(ctx, reconcileWait)
	defer stop()
	go w.Run(wctx)
	var last answer
	n, err := ran(t, func() error {
		for wctx.Err() == nil {
			var err error
			if last, err = env.call(ctx, c); err != nil {
				return err
			}
			if last.status == http.StatusOK {
				return nil
			}
			time.Sleep(reconcileEvery)
		}
		return nil
	})
	switch {
	case err != nil:
		return Fail, err.Error()
	case n != 0:
		return Fail, fmt.Sprintf("while the record waited for reconciliation a retry ran the tool %d times", n)
	case last.status != http.StatusOK || !bytes.Equal(last.body, asker.body):
		return Fail, fmt.Sprintf("after %s and %d questions answered committed, the retry answered %d %s, not the committed outcome", reconcileWait, asker.asked.Load(), last.status, last.body)
	}
	return Pass, fmt.Sprintf("UNKNOWN record completed after %d question(s); the retry replays the committed outcome, not run", asker.asked.Load())
}
