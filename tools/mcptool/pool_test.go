package mcptool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// TestPoolOpensAtMostItsSizeOfSessions: many calls, some concurrent, are
// carried by the pool's sessions, never a session per call.
func TestPoolOpensAtMostItsSizeOfSessions(t *testing.T) {
	const poolSize, sequential, concurrent = 3, 20, 30
	up := newHTTPUpstream(t, mcptest.Options{})
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "tickets", URL: up.http.URL, Prefix: "t_", Sessions: poolSize, RecordIsError: true}, mcptool.Options{})
	tool := lookup(t, reg, "t_create_ticket").Tool
	// Every slot connects at start; wait for them so a late handshake is
	// not mistaken for a session opened by a call.
	waitFor(t, "the pool's sessions", func() bool { return up.srv.Initialized() >= poolSize })
	before := up.srv.Initialized()

	call := func(i int) error {
		resp, err := tool.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(fmt.Sprintf(`{"title":"t%d","delay_ms":20}`, i)), Tenant: "acme"})
		if err != nil {
			return err
		}
		if resp.Status != http.StatusOK {
			return fmt.Errorf("call %d: status %d", i, resp.Status)
		}
		return nil
	}
	for i := range sequential {
		if err := call(i); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, concurrent)
	for i := range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- call(sequential + i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(up.srv.Executions(mcptest.ToolCreate)); n != sequential+concurrent {
		t.Fatalf("%d executions, want %d", n, sequential+concurrent)
	}
	if before != poolSize {
		t.Errorf("%d sessions initialized at start, want the pool size %d", before, poolSize)
	}
	if after := up.srv.Initialized(); after != before {
		t.Errorf("%d calls opened %d more sessions (%d in all), want none beyond the pool's %d", sequential+concurrent, after-before, after, poolSize)
	}
}
