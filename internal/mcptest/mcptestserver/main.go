// Command mcptestserver serves the mcptest MCP server over stdio, for the
// tests of stdio MCP upstreams. Every execution is appended as a JSON line
// to the file named by -log (or MCPTEST_LOG), so a test can count them
// across restarts of the process.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/mcptest"
)

func main() {
	logPath := flag.String("log", os.Getenv("MCPTEST_LOG"), "file that receives every execution as a JSON line")
	pageSize := flag.Int("page-size", 0, "tools/list page size")
	extra := flag.String("extra-tool", "", "an echo tool to add at start")
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
	if err := s.MCP().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptestserver:", err)
	}
}
