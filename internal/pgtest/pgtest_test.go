package pgtest

import (
	"context"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestSchemaIsDroppedAfterTheTest: Schema creates a schema the test can
// use, and its cleanup drops it (and only it).
func TestSchemaIsDroppedAfterTheTest(t *testing.T) {
	url := URL(t)
	var name string
	t.Run("user", func(t *testing.T) {
		name = Schema(t, url)
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(t.Context(), "CREATE TABLE "+name+".t (x int)"); err != nil {
			t.Fatalf("use the schema: %v", err)
		}
	})
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(t.Context(), "SELECT exists(SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("schema %s still exists after its test ended", name)
	}
}

// TestPrivateServerSurvivesKill: data committed before a SIGKILL of the
// whole server is there after the restart (crash recovery), and the server
// is unreachable in between.
func TestPrivateServerSurvivesKill(t *testing.T) {
	srv := Start(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	// The backend of an open connection died with the postmaster: a
	// statement right after the kill fails and commits nothing.
	if _, err := conn.Exec(ctx, "INSERT INTO kept VALUES (43)"); err == nil {
		t.Fatal("a backend outlived the killed server and committed")
	}
	_ = conn.Close(ctx)
	if srv.Pid() != 0 {
		t.Fatal("Pid after Kill")
	}
	if c, err := pgx.Connect(ctx, srv.URL); err == nil {
		_ = c.Close(ctx)
		t.Fatal("connected to a killed server")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var x int
	if err := conn.QueryRow(ctx, "SELECT sum(x) FROM kept").Scan(&x); err != nil || x != 42 {
		t.Fatalf("after the restart: %d, %v", x, err)
	}
}

// TestPrivateServerMovesOffATakenPort: a port another process took between
// freePort and postgres's bind is left for a new one, and the server that
// starts is this test's own.
func TestPrivateServerMovesOffATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	srv := startWith(t, func() (int, error) { return takenPort, nil })
	if srv.Port == takenPort {
		t.Fatalf("the server kept the taken port %d", takenPort)
	}
	conn, err := pgx.Connect(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var dir string
	if err := conn.QueryRow(t.Context(), "SELECT current_setting('data_directory')").Scan(&dir); err != nil || dir != srv.Dir {
		t.Fatalf("the server on port %d serves %q, %v; want %q", srv.Port, dir, err, srv.Dir)
	}
}
