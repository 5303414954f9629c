package gatewaycmd

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
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// layoutGuarantee names the store's guarantee in verify's output; its
// tool column is storeColumn, since it holds for the store, not a tool.
const (
	layoutGuarantee = "newer store layout is refused"
	storeColumn     = "(store)"
)

// checkNewerLayout opens a second scratch store of the scratch space's
// kind that a newer gateway has marked (markNewerLayout), serves tool t on
// it, and checks a call is refused without running.
func checkNewerLayout(ctx context.Context, env *verifyEnv, space *scratchSpace, t *verifyTool) VerifyResult {
	r := VerifyResult{Tool: storeColumn, Guarantee: layoutGuarantee}
	if t == nil {
		r.Verdict, r.Detail = verifyNA, "no tool of this config stores records with arguments verify can make"
		return r
	}
	r.Verdict, r.Detail = newerLayoutVerdict(ctx, env, space, t)
	return r
}

// markNewerLayout sets the layout up in the space's second store and then
// records there the layout version after the newest this gateway knows,
// where each kind keeps it (the place `gateway migrate -print` names).
func markNewerLayout(ctx context.Context, space *scratchSpace) error {
	store, _, err := space.newer.openStoreAnyLayout(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	layouts, ok := store.(idempotency.Layouts)
	if !ok {
		_ = store.Close()
		return fmt.Errorf("the %s store has no layout version", space.kind)
	}
	v, err := layouts.LayoutVersion(ctx)
	if err == nil {
		switch s := store.(type) {
		case clientOwningStore:
			err = s.client.Set(ctx, space.newer.Store.KeyPrefix+"layout", v.Known+1, 0).Err()
		case *pgstore.Store:
			_, err = s.Pool().Exec(ctx, "INSERT INTO "+s.Schema()+".schema_version (version) VALUES ($1)", v.Known+1)
		}
	}
	if closeErr := store.Close(); err == nil {
		err = closeErr
	}
	if err == nil && space.kind == storeKindEmbedded {
		err = boltstore.MarkNewerLayout(space.newer.Store.Path) // a closed file only
	}
	if err != nil {
		return fmt.Errorf("marking a newer layout in %s: %w", space.desc, err)
	}
	return nil
}

func newerLayoutVerdict(ctx context.Context, env *verifyEnv, space *scratchSpace, t *verifyTool) (string, string) {
	if err := markNewerLayout(ctx, space); err != nil {
		return verifyFail, err.Error()
	}
	noMigrate := *space.newer
	noMigrate.Store.Migrate = new(bool)
	store, _, err := noMigrate.openStoreAnyLayout(ctx, slog.New(slog.DiscardHandler))
	if errors.Is(err, idempotency.ErrNewerLayout) {
		return verifyPass, "refused at open: " + err.Error()
	}
	if err != nil {
		return verifyFail, err.Error()
	}
	defer func() { _ = store.Close() }()
	stand := &standIn{spec: t.spec}
	registry := tools.NewRegistry()
	if err := registry.Add(stand); err != nil {
		return verifyFail, err.Error()
	}
	reg := prometheus.NewRegistry()
	policies := map[string]tools.Policy{t.name: env.opts.Policies[t.name]}
	gw, err := gateway.NewServer(callpath.Options{Store: store, Tools: registry, Policies: policies, KeyMode: env.opts.KeyMode,
		Logger: slog.New(slog.DiscardHandler), Registerer: reg, Gatherer: reg})
	if errors.Is(err, idempotency.ErrNewerLayout) {
		return verifyPass, "refused at start: " + err.Error()
	}
	if err != nil {
		return verifyFail, "scratch gateway on the newer store: " + err.Error()
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	layoutEnv := &verifyEnv{srv: srv, client: env.client}
	args, _, err := t.freshArgs(ctx, env)
	if err != nil {
		return verifyNA, err.Error()
	}
	resp, err := layoutEnv.call(ctx, verifyCall{tool: t.name, session: env.session(), step: 1, args: args})
	switch {
	case err != nil:
		return verifyFail, err.Error()
	case stand.runs.Load() != 0:
		return verifyFail, fmt.Sprintf("on a store a newer gateway changed, %s ran (answered %d)", t.name, resp.status)
	case resp.status != http.StatusServiceUnavailable || problemCode(resp.body) != wire.CodeStoreUnavailable:
		return verifyFail, fmt.Sprintf("on a store a newer gateway changed, a call answered %d %s, not 503 %s", resp.status, resp.body, wire.CodeStoreUnavailable)
	}
	return verifyPass, fmt.Sprintf("a call of %s on a store with a newer layout (%s): 503 %s, not run", t.name, space.kind, wire.CodeStoreUnavailable)
}
