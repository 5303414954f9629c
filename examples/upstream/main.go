// Command upstream is a tiny HTTP upstream tool for trying the gateway:
// POST /tickets opens a ticket and answers 201 with it. It deduplicates on
// the Idempotency-Key the gateway sends (in memory), which is what a real
// upstream should do, so that a call the gateway ran twice after a lost
// lease still opens one ticket. The compose file in deploy/ runs it.
//
//	go run ./examples/upstream -addr 127.0.0.1:9000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9000", "address to listen on")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: newTickets().routes(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "upstream listening on %s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// ticket is what POST /tickets answers.
type ticket struct {
	ID          int    `json:"id"`
	Title       string `json:"title"`
	ExecutionID string `json:"execution_id"`
}

// tickets keeps the tickets opened, by the gateway's scoped Idempotency-Key.
type tickets struct {
	mu    sync.Mutex
	byKey map[string]ticket
}

func newTickets() *tickets { return &tickets{byKey: map[string]ticket{}} }

func (t *tickets) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tickets", t.open)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux
}

// open opens a ticket once per Idempotency-Key and answers the same ticket
// to every repeat of that key.
func (t *tickets) open(w http.ResponseWriter, r *http.Request) {
	var args struct {
		Title string `json:"title"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&args); err != nil || args.Title == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {\"title\": \"...\"}"})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "Idempotency-Key required"})
		return
	}
	t.mu.Lock()
	tk, seen := t.byKey[key]
	if !seen {
		tk = ticket{ID: len(t.byKey) + 1, Title: args.Title, ExecutionID: r.Header.Get("Tool-Execution-Id")}
		t.byKey[key] = tk
	}
	t.mu.Unlock()
	writeJSON(w, http.StatusCreated, tk)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
