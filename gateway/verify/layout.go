package verify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

const (
	// LayoutGuarantee names the store's guarantee in verify's output.
	LayoutGuarantee = "newer store layout is refused"
	// StoreColumn is the tool column of LayoutGuarantee's line: it holds
	// for the store, not a tool.
	StoreColumn = "(store)"
)

// checkNewerLayout opens a second scratch store of the scratch store's
// kind that a newer gateway has marked (Scratch.MarkNewerLayout), serves
// tool t on it, and checks a call is refused without running.
func checkNewerLayout(ctx context.Context, env *scratchEnv, scratch Scratch, t *checkedTool) Result {
	r := Result{Tool: StoreColumn, Guarantee: LayoutGuarantee}
	if t == nil {
		r.Verdict, r.Detail = NA, "no tool of this config stores records with arguments verify can make"
		return r
	}
	r.Verdict, r.Detail = newerLayoutVerdict(ctx, env, scratch, t)
	return r
}

func newerLayoutVerdict(ctx context.Context, env *scratchEnv, scratch Scratch, t *checkedTool) (string, string) {
	if err := scratch.MarkNewerLayout(ctx); err != nil {
		return Fail, err.Error()
	}
	store, err := scratch.OpenNewer(ctx)
	if errors.Is(err, idempotency.ErrNewerLayout) {
		return Pass, "refused at open: " + err.Error()
	}
	if err != nil {
		return Fail, err.Error()
	}
	defer func() { _ = store.Close() }()
	stand := &standIn{spec: t.spec}
	registry := tools.NewRegistry()
	if err := registry.Add(stand); err != nil {
		return Fail, err.Error()
	}
	reg := prometheus.NewRegistry()
	policies := map[string]tools.Policy{t.name: env.opts.Policies[t.name]}
	gw, err := gateway.NewServer(callpath.Options{Store: store, Tools: registry, Policies: policies, KeyMode: env.opts.KeyMode,
		Logger: slog.New(slog.DiscardHandler), Registerer: reg, Gatherer: reg})
	if errors.Is(err, idempotency.ErrNewerLayout) {
		return Pass, "refused at start: " + err.Error()
	}
	if err != nil {
		return Fail, "scratch gateway on the newer store: " + err.Error()
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	layoutEnv := &scratchEnv{srv: srv, client: env.client}
	args, _, err := t.freshArgs(ctx, env)
	if err != nil {
		return NA, err.Error()
	}
	resp, err := layoutEnv.call(ctx, toolCall{tool: t.name, session: env.session(), step: 1, args: args})
	switch {
	case err != nil:
		return Fail, err.Error()
	case stand.runs.Load() != 0:
		return Fail, fmt.Sprintf("on a store a newer gateway changed, %s ran (answered %d)", t.name, resp.status)
	case resp.status != http.StatusServiceUnavailable || problemCode(resp.body) != wire.CodeStoreUnavailable:
		return Fail, fmt.Sprintf("on a store a newer gateway changed, a call answered %d %s, not 503 %s", resp.status, resp.body, wire.CodeStoreUnavailable)
	}
	return Pass, fmt.Sprintf("a call of %s on a store with a newer layout (%s): 503 %s, not run", t.name, scratch.Kind, wire.CodeStoreUnavailable)
}
