package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/pgxtx"
	"github.com/toolgateway/toolgateway/wire"
)

// orderTool is a transactional tool: every run inserts one row into the
// business table "orders" of the store's schema, in the call's transaction,
// then answers as its mode says.
type orderTool struct {
	schema  string
	mode    atomic.Value // "ok" (default), "500", "error"
	started chan struct{}
	release chan struct{} // when set, a run waits for it after writing
	runs    atomic.Int64
}

func (t *orderTool) Spec() tools.Spec {
	return tools.Spec{Name: "place-order", Description: "writes an order row", Transactional: true}
}

func (t *orderTool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	t.runs.Add(1)
	tx, err := pgxtx.From(req)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+t.schema+`.orders (execution_id) VALUES ($1)`, req.ExecutionID); err != nil {
		return nil, err
	}
	if t.release != nil {
		t.started <- struct{}{}
		<-t.release
	}
	switch t.mode.Load() {
	case "500":
		return &tools.Response{Status: http.StatusInternalServerError, Body: []byte(`{"error":"card declined upstream"}`)}, nil
	case "error":
		return nil, errors.New("order system failed")
	}
	return &tools.Response{Status: http.StatusOK, Body: []byte(`{"order":"` + req.ExecutionID + `"}`)}, nil
}

// newOrderHarness serves orderTool on a PostgreSQL store of its own schema.
func newOrderHarness(t *testing.T, opts ...harnessOption) (*harness, *orderTool, func() []string) {
	t.Helper()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := pgstore.New(t.Context(), pool, pgstore.Options{Schema: schema, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if _, err := pool.Exec(t.Context(), `CREATE TABLE `+schema+`.orders (execution_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	tool := &orderTool{schema: schema}
	h := newHarness(t, "", []tools.Tool{tool}, append([]harnessOption{withStore(store)}, opts...)...)
	orders := func() []string {
		rows, err := pool.Query(context.Background(), `SELECT execution_id FROM `+schema+`.orders ORDER BY execution_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	return h, tool, orders
}

// TestTransactionalToolCommitsWithItsRecord: the order row and the
// replayable record commit together; a replay writes nothing.
func TestTransactionalToolCommitsWithItsRecord(t *testing.T) {
	h, tool, orders := newOrderHarness(t)
	call := callSpec{tool: "place-order", session: "tx-s1", step: 0, args: `{"sku":"A-1"}`}
	first := h.do(call)
	if first.status != http.StatusOK {
		t.Fatalf("first call: %d %s", first.status, first.body)
	}
	exec := first.header.Get(wire.HeaderExecutionID)
	if got := orders(); len(got) != 1 || got[0] != exec {
		t.Fatalf("orders after the call = %v, want exactly [%s]", got, exec)
	}
	again := h.do(call)
	if again.status != http.StatusOK || again.header.Get(wire.HeaderReplayed) != "true" || string(again.body) != string(first.body) {
		t.Fatalf("retry: %d replayed=%q %s", again.status, again.header.Get(wire.HeaderReplayed), again.body)
	}
	if got := orders(); len(got) != 1 || tool.runs.Load() != 1 {
		t.Fatalf("after the replay: orders %v, runs %d; want one of each", got, tool.runs.Load())
	}
}

// TestTransactionalToolFailureRollsBack: a 5xx answer or an error leaves no
// row, and the record is released, so the retry runs (and commits) once.
func TestTransactionalToolFailureRollsBack(t *testing.T) {
	for _, mode := range []string{"500", "error"} {
		t.Run(mode, func(t *testing.T) {
			h, tool, orders := newOrderHarness(t)
			tool.mode.Store(mode)
			call := callSpec{tool: "place-order", session: "tx-fail", step: 3, args: `{"sku":"B-2"}`}
			r := h.do(call)
			if r.status != http.StatusInternalServerError {
				t.Fatalf("failed call: %d %s", r.status, r.body)
			}
			if got := orders(); len(got) != 0 {
				t.Fatalf("a failed run left rows: %v", got)
			}
			tool.mode.Store("ok")
			r = h.do(call)
			if r.status != http.StatusOK || r.header.Get(wire.HeaderReplayed) != "false" {
				t.Fatalf("retry after the failure: %d %q %s", r.status, r.header.Get(wire.HeaderReplayed), r.body)
			}
			if got := orders(); len(got) != 1 || got[0] != r.header.Get(wire.HeaderExecutionID) || tool.runs.Load() != 2 {
				t.Fatalf("orders %v, runs %d: want the retry's row only, after two runs", got, tool.runs.Load())
			}
		})
	}
}

// TestTransactionalToolLostLeaseRollsBack: an operator deletes the record
// while the tool runs (its lease is lost); the completion's fencing check
// fails inside the transaction, so the row is rolled back with it, the
// client is told to retry, and the retry's row is the only one.
func TestTransactionalToolLostLeaseRollsBack(t *testing.T) {
	h, tool, orders := newOrderHarness(t)
	tool.started, tool.release = make(chan struct{}), make(chan struct{})
	call := callSpec{tool: "place-order", session: "tx-lost", step: 1, args: `{"sku":"C-3"}`}
	done := make(chan response, 1)
	go func() { done <- h.do(call) }()
	<-tool.started
	key := derivedKey(t, call.session, call.step, call.tool, call.args)
	if err := h.store.Delete(t.Context(), idempotency.Scope{Tenant: "anonymous", Tool: call.tool, Key: key}); err != nil {
		t.Fatal(err)
	}
	close(tool.release)
	r := <-done
	wantProblem(t, r, http.StatusInternalServerError, wire.CodeToolFailed)
	if got := orders(); len(got) != 0 {
		t.Fatalf("the run that lost its lease committed rows: %v", got)
	}
	tool.release = nil
	r = h.do(call)
	if r.status != http.StatusOK {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	if got := orders(); len(got) != 1 || got[0] != r.header.Get(wire.HeaderExecutionID) {
		t.Fatalf("orders %v: want only the retry's", got)
	}
}

// TestTransactionalToolNeedsPostgres: on a store that cannot share the
// tool's transaction the gateway refuses to start, naming the tool.
func TestTransactionalToolNeedsPostgres(t *testing.T) {
	registry := tools.NewRegistry()
	if err := registry.Add(&orderTool{}); err != nil {
		t.Fatal(err)
	}
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "gw.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, err = gateway.NewServer(callpath.Options{Store: store, Tools: registry})
	if err == nil || !strings.Contains(err.Error(), `"place-order"`) || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("NewServer with a transactional tool on the embedded store: %v; want an error naming the tool and the store it needs", err)
	}
}
