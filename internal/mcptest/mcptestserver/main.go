// Command mcptestserver serves the mcptest MCP server over stdio, for the
// tests of stdio MCP upstreams. Every execution is appended as a JSON line
// to the file named by -log (or MCPTEST_LOG), so a test can count them
// across restarts of the process.
//
// With -http ADDR it serves Streamable HTTP at /mcp instead, prints
// "listening on http://HOST:PORT" on stdout, and takes two test controls
// beside it, for tests that are not written in Go (the console's browser
// tests): POST /control/create-description sets create_ticket's
// description to the body (a "rug pull": the server announces
// list_changed), GET /control/executions?tool=NAME answers how many calls
// of the tool ran to the end, as a JSON number.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/mcptest"
)

func main() {
	logPath := flag.String("log", os.Getenv("MCPTEST_LOG"), "file that receives every execution as a JSON line")
	pageSize := flag.Int("page-size", 0, "tools/list page size")
	extra := flag.String("extra-tool", "", "an echo tool to add at start")
	httpAddr := flag.String("http", "", "serve Streamable HTTP on this address (with test controls) instead of stdio")
	flag.Parse()
	var extraTools []string
	if *extra != "" {
		extraTools = append(extraTools, *extra)
	}
	fmt.Fprintln(os.Stderr, "mcptestserver starting, pid", os.Getpid())
	s, err := mcptest.New(mcptest.Options{LogPath: *logPath, PageSize: *pageSize, ExtraTools: extraTools})
	if err != nil {
		log.Fatal(err)
	}
	if *httpAddr != "" {
		log.Fatal(serveHTTP(s, *httpAddr))
	}
	if err := s.MCP().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptestserver:", err)
	}
}

// serveHTTP serves s at /mcp and the test controls on addr.
func serveHTTP(s *mcptest.Server, addr string) error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP() }, nil))
	mux.HandleFunc("POST /control/create-description", func(w http.ResponseWriter, r *http.Request) {
		description, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil || len(description) == 0 {
			http.Error(w, "send the new description as the body", http.StatusBadRequest)
			return
		}
		s.SetCreateDescription(string(description))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /control/executions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "%d\n", len(s.Executions(r.URL.Query().Get("tool"))))
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcptestserver: %w", err)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	return http.Serve(ln, mux)
}
