package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
)

// checkChoice refuses a store section that names two shared stores: the
// gateway would have to guess which one holds the records.
func (s StoreConfig) checkChoice() error {
	if s.PostgresURL == "" {
		if s.PostgresSchema != "" {
			return errors.New("store.postgres_schema: set only with store.postgres_url")
		}
		return nil
	}
	if s.PostgresSchema != "" {
		if err := pgstore.ValidateSchema(s.PostgresSchema); err != nil {
			return fmt.Errorf("store.postgres_schema: %w", err)
		}
	}
	switch {
	case s.RedisURL != "":
		return errors.New("store: both store.redis_url and store.postgres_url are set (REDIS_URL and DATABASE_URL set them too); keep exactly one")
	case len(s.ClusterAddrs) > 0:
		return errors.New("store: both store.cluster_addrs and store.postgres_url are set (DATABASE_URL sets postgres_url too); keep exactly one")
	case s.WaitReplicas != 0:
		return errors.New("store.wait_replicas: Redis only; PostgreSQL commits are as durable as the server's synchronous_commit setting")
	}
	return nil
}

// openPostgres opens the PostgreSQL store, which creates or upgrades its
// schema. As with Redis, a database that does not answer at start-up is
// not fatal (openStore warns): the store migrates on first use, calls get
// 503 and /readyz says so until it answers. A database that answers and
// refuses (a schema newer than this gateway, missing rights) stops the
// start.
func (c *Config) openPostgres(ctx context.Context) (idempotency.Store, string, error) {
	s, err := pgstore.Open(ctx, c.Store.PostgresURL, pgstore.Options{Schema: c.Store.PostgresSchema, NoMigrate: !c.Store.migrates(),
		ReceiptOutbox: c.receiptsOn()})
	if err != nil {
		// Name where the URL came from: the environment overrides the file.
		return nil, "", fmt.Errorf("%s: %w", orString(c.postgresURLFrom, "store.postgres_url"), err)
	}
	desc := "postgres:" + redactedURL(c.Store.PostgresURL) + " schema " + s.Schema() // storeChoice's form
	return s, desc, nil
}

// redactedURL is the URL for logs: host, port and database, never the
// user's password.
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(connection string)"
	}
	return u.Host + u.Path
}
