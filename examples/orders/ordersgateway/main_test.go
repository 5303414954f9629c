package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/internal/gatewayproc"
	"github.com/toolgateway/toolgateway/internal/pgtest"
)

// startOrdersGateway starts ordersGatewayCommand and returns the base URL
// once the gateway listens.
func startOrdersGateway(t *testing.T, databaseURL, storeSchema, table string) string {
	t.Helper()
	return gatewayproc.Start(t, ordersGatewayCommand(t, databaseURL, storeSchema, table))
}

// ordersGatewayCommand builds this program and returns the command that
// runs it with the store's schema in a config file and databaseURL and
// table in the environment.
func ordersGatewayCommand(t *testing.T, databaseURL, storeSchema, table string) *exec.Cmd {
	t.Helper()
	bin := gatewayproc.Build(t, "./examples/orders/ordersgateway")
	config := filepath.Join(t.TempDir(), "gateway.json")
	if err := os.WriteFile(config, fmt.Appendf(nil, `{"listen": "127.0.0.1:0", "store": {"postgres_schema": %q}}`, storeSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", config)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+databaseURL, "ORDERS_TABLE="+table)
	return cmd
}

// countOrders counts the rows of table.
func countOrders(t *testing.T, databaseURL, table string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// withQuery adds a query parameter to a postgres:// URL.
func withQuery(url, param string) string {
	if strings.Contains(url, "?") {
		return url + "&" + param
	}
	return url + "?" + param
}

// placeOrderTwice places one order and retries it: one row, one replay.
func placeOrderTwice(t *testing.T, gatewayURL, databaseURL, table string) {
	t.Helper()
	session := agentclient.New(gatewayURL).Session("orders-" + t.Name())
	first, err := session.Call(t.Context(), 0, "place-order", map[string]any{"sku": "sku-1"})
	if err != nil || first.Status != http.StatusCreated || first.Replayed {
		t.Fatalf("place-order: %+v, %v", first, err)
	}
	again, err := session.Call(t.Context(), 0, "place-order", map[string]any{"sku": "sku-1"})
	if err != nil || !again.Replayed || again.ExecutionID != first.ExecutionID {
		t.Fatalf("retry of place-order: %+v, %v; want the replay of %s", again, err, first.ExecutionID)
	}
	if n := countOrders(t, databaseURL, table); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
}

// TestAcceptsPoolOptionsInDatabaseURL: pgxpool settings in DATABASE_URL,
// which the gateway's store accepts, work for the orders table too.
func TestAcceptsPoolOptionsInDatabaseURL(t *testing.T) {
	base := pgtest.URL(t)
	schema := pgtest.Schema(t, base)
	url := withQuery(base, "pool_max_conns=3")
	gatewayURL := startOrdersGateway(t, url, schema, schema+".orders")
	placeOrderTwice(t, gatewayURL, base, schema+".orders")
}

// TestStartsWhilePostgresIsDown: like the gateway, ordersgateway comes up
// not ready while PostgreSQL is down, refuses calls with a retryable 503
// without running anything, and serves orders (creating the table) once
// PostgreSQL answers.
func TestStartsWhilePostgresIsDown(t *testing.T) {
	server := pgtest.Start(t)
	server.Kill()
	gatewayURL := startOrdersGateway(t, server.URL, "toolgateway", "orders")

	resp, err := http.Get(gatewayURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz with PostgreSQL down: %d, want 503", resp.StatusCode)
	}
	impatient := agentclient.New(gatewayURL, agentclient.WithMaxAttempts(1)).Session("orders-down")
	_, err = impatient.Call(t.Context(), 0, "place-order", map[string]any{"sku": "sku-1"})
	var problem *agentclient.Error
	if !errors.As(err, &problem) || problem.Status != http.StatusServiceUnavailable || !problem.Retryable {
		t.Errorf("place-order with PostgreSQL down: %v, want a retryable 503", err)
	}

	if err := server.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(gatewayURL + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz never said ready after PostgreSQL came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	placeOrderTwice(t, gatewayURL, server.URL, "orders")
}

// TestStopsWhenPostgresRefusesTheTable: a PostgreSQL that answers and
// refuses to create the table (here: a schema that does not exist) stops
// the start, as a store schema the gateway cannot create does.
func TestStopsWhenPostgresRefusesTheTable(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	cmd := ordersGatewayCommand(t, url, schema, "no_such_schema_here.orders")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "no_such_schema_here") {
		t.Errorf("ordersgateway with a table it cannot create: %v\n%s\nwant a failed start naming the table", err, out)
	}
}
