package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// The PostgreSQL store's layout version is its schema version (the
// schema_version table, schema.go). The claim function and the statements
// are this code's, so every gateway reads the version again at most once
// per idempotency.LayoutRefresh and refuses to decide on a schema newer
// than it knows; a gateway that upgraded a schema other gateways used
// waits two refreshes before deciding anything.

// storeKind names this store in layout errors.
const storeKind = "postgres"

// readVersion returns the schema's version (0: no schema yet).
func (s *Store) readVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, qualifier(s.schema)("SELECT coalesce(max(version), 0) FROM @.schema_version")).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
		return 0, nil // undefined table or schema: nothing installed yet
	}
	return v, err
}

// migrateAndWait upgrades the schema; after upgrading one that older
// gateways used, it waits until they have read the new version. It
// returns the version found before.
func (s *Store) migrateAndWait(ctx context.Context) (int, error) {
	before, err := migrate(ctx, s.pool, s.schema)
	if err != nil {
		return before, err
	}
	return before, idempotency.WaitForOlderGateways(ctx, before, currentVersion)
}

// LayoutVersion reads the schema's version.
func (s *Store) LayoutVersion(ctx context.Context) (idempotency.LayoutVersion, error) {
	v := idempotency.LayoutVersion{Writes: currentVersion, Known: currentVersion}
	found, err := s.readVersion(ctx)
	if err != nil {
		return v, fmt.Errorf("pgstore: schema %s: read version: %w", s.schema, err)
	}
	v.Found = found
	return v, nil
}

// Migrate creates or upgrades the schema (nothing when current or newer)
// and returns the versions before and after.
func (s *Store) Migrate(ctx context.Context) (before, after idempotency.LayoutVersion, err error) {
	return idempotency.MigrateWith(ctx, s, func(ctx context.Context) error {
		_, err := s.migrateAndWait(ctx)
		return err
	})
}

// MigrationPlan returns the SQL Migrate would run, in one transaction under
// the migration's advisory lock.
func (s *Store) MigrationPlan(ctx context.Context) (string, error) {
	v, err := s.LayoutVersion(ctx)
	if err != nil {
		return "", err
	}
	if v.Found >= currentVersion {
		return fmt.Sprintf("-- nothing to do: schema %s is at version %d\n", s.schema, v.Found), nil
	}
	q := qualifier(s.schema)
	var b strings.Builder
	fmt.Fprintf(&b, "-- schema %s: version %d to %d, in one transaction\nBEGIN;\nSELECT pg_advisory_xact_lock(%d, hashtext('%s'));\n", s.schema, v.Found, currentVersion, migrationLockKey, s.schema)
	b.WriteString(q(schemaVersionTable))
	for i := v.Found; i < currentVersion; i++ {
		fmt.Fprintf(&b, "\n-- version %d\n%s\nINSERT INTO %s (version) VALUES (%d);\n", i+1, strings.TrimSpace(q(migrations[i])), q("@.schema_version"), i+1)
	}
	b.WriteString("COMMIT;\n")
	return b.String(), nil
}
