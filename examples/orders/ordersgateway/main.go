// Command ordersgateway is the gateway with one transactional tool,
// place-order (package orders), on the PostgreSQL store: the orders table
// lives in the store's database and each order commits with its call's
// record. It takes the gateway's flags and configuration; ORDERS_TABLE
// names the table (default "orders", schema-qualify it as needed), which
// it creates at start from the store's URL (store.postgres_url is read
// from DATABASE_URL here).
//
//	DATABASE_URL=postgres://localhost/test go run ./examples/orders/ordersgateway
package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/examples/orders"
	"github.com/toolgateway/toolgateway/gateway/gatewaycmd"
	"github.com/toolgateway/toolgateway/tools"
)

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
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("ordersgateway: connect: %w", err)
	}
	err = orders.CreateTable(ctx, conn, table)
	_ = conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	tools.Register(&orders.Tool{Table: table})
	return gatewaycmd.RunIO(ctx, args, getenv, stdin, stdout)
}
