// Command ordersgateway is the gateway with one transactional tool,
// place-order (package orders), on the PostgreSQL store: the orders table
// lives in the store's database and each order commits with its call's
// record. It takes the gateway's flags and configuration; ORDERS_TABLE
// names the table (default "orders", schema-qualify it as needed), which
// it creates from the store's URL (store.postgres_url is read from
// DATABASE_URL here, with every option the gateway accepts in it, such as
// pool_max_conns).
//
// Like the gateway, it starts while PostgreSQL is down: it logs a warning,
// /readyz answers 503 and calls get 503 store_unavailable until PostgreSQL
// answers; the first call after that creates the table (502
// upstream_unreachable, retried by the SDKs, if that fails). A PostgreSQL
// that answers and refuses to create the table stops the start, as one
// that refuses the store's schema stops the gateway's.
//
//	DATABASE_URL=postgres://localhost/test go run ./examples/orders/ordersgateway
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgateway/toolgateway/examples/orders"
	"github.com/toolgateway/toolgateway/gateway/gatewaycmd"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/tools"
)

// createAtStartTimeout bounds the attempt to create the table at start, as
// the gateway bounds its first ping of the store.
const createAtStartTimeout = 2 * time.Second

func main() {
	gatewaycmd.MainWith(run)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) error {
	table := getenv("ORDERS_TABLE")
	if table == "" {
		table = "orders"
	}
	url := getenv("DATABASE_URL")
	if url == "" {
		return errors.New("ordersgateway: DATABASE_URL must name the PostgreSQL database of the store and the orders")
	}
	// The store's own parsing, so every URL the gateway takes works here.
	cfg, err := pgstore.PoolConfig(url)
	if err != nil {
		return fmt.Errorf("ordersgateway: DATABASE_URL: %w", err)
	}
	// One connection, opened when first needed: it only creates the table.
	cfg.MaxConns, cfg.MinConns = 1, 0
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("ordersgateway: DATABASE_URL: %w", err)
	}
	defer db.Close()

	tool := &orders.Tool{Table: table, DB: db}
	startCtx, cancel := context.WithTimeout(ctx, createAtStartTimeout)
	err = tool.EnsureTable(startCtx)
	cancel()
	if err != nil && !pgstore.IsConnectionError(err) {
		// PostgreSQL answers and refuses (rights, a bad table name): as for
		// the gateway's own schema, that stops the start.
		return fmt.Errorf("ordersgateway: %w", err)
	}
	if err != nil {
		slog.New(slog.NewJSONHandler(stdout, nil)).Warn(
			"orders table not created yet; place-order answers 503 until PostgreSQL answers", "table", table, "error", err)
	}
	tools.Register(tool)
	return gatewaycmd.RunIO(ctx, args, getenv, stdin, stdout)
}
