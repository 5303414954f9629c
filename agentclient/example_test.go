package agentclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/wire"
)

// The examples call a real gateway at gatewayURL (see gateway_test.go).

// One call of an agent run. The README shows this code.
func Example() {
	ctx := context.Background()
	sessionID := "run-" + ulid.Make().String() // minted when the run starts, kept in its checkpoint
	client := agentclient.New(gatewayURL)      // add agentclient.WithToken(token) when auth is on
	session := client.Session(sessionID)
	res, err := session.Call(ctx, 0, "provision-infra", map[string]any{
		"name": "db", "region": "eu-west-1", "cpus": 2,
	})
	if err != nil {
		var perr *agentclient.Error // a problem+json answer (400, 409 outcome_unknown, 422…)
		if errors.As(err, &perr) {
			fmt.Println(perr.Code, perr.Detail)
		}
		return
	}
	fmt.Println(res.Status, res.Replayed) // sent again after a crash: the same ExecutionID, Replayed true
	// Output:
	// 201 false
}

// An agent calls step 4, then crashes before it checkpoints the result. The
// restarted runtime restores the session id and the pending step 4 from its
// checkpoint and sends the call again with a new client: the gateway replays
// the recorded outcome and the tool does not run a second time. If the
// model instead regenerates step 4 with other arguments, the gateway refuses
// it and names the call that holds the step.
func Example_crashAndReplay() {
	ctx := context.Background()
	// Before the crash. The session id was minted when the run started.
	sessionID := "run-" + ulid.Make().String()
	session := agentclient.New(gatewayURL).Session(sessionID)
	first, err := session.Call(ctx, 4, "provision-infra", map[string]any{"name": "web", "region": "eu-west-1", "cpus": 4})
	if err != nil {
		fmt.Println("call failed:", err)
		return
	}
	fmt.Println("first:  status", first.Status, "replayed", first.Replayed)

	// ... the process dies here; the result never reached the checkpoint ...

	// After the restart: same session id, same step, same arguments (here as
	// the JSON text the checkpoint stored, with other member order).
	resumed := agentclient.New(gatewayURL).Session(sessionID)
	again, err := resumed.Call(ctx, 4, "provision-infra", json.RawMessage(`{"cpus": 4, "region": "eu-west-1", "name": "web"}`))
	if err != nil {
		fmt.Println("call failed:", err)
		return
	}
	fmt.Println("replay: status", again.Status, "replayed", again.Replayed)
	fmt.Println("same execution id:", again.ExecutionID == first.ExecutionID)
	fmt.Println("same body:", string(again.Body) == string(first.Body))

	// Step 4 regenerated with other arguments: 422 step_conflict.
	_, err = resumed.Call(ctx, 4, "provision-infra", map[string]any{"name": "web", "region": "us-east-1", "cpus": 4})
	var perr *agentclient.Error
	if errors.As(err, &perr) && perr.Code == wire.CodeStepConflict {
		fmt.Println("step 4 is held by", perr.Tool, "execution", perr.ExecutionID == first.ExecutionID)
	}
	// Output:
	// first:  status 201 replayed false
	// replay: status 201 replayed true
	// same execution id: true
	// same body: true
	// step 4 is held by provision-infra execution true
}

// Parallel tool calls of one model turn take distinct step indices, so each
// runs once and each is replayed on its own.
func ExampleSession_Call() {
	session := agentclient.New(gatewayURL).Session("run-" + ulid.Make().String())
	// The model's turn after step 6 asked for three machines: steps 7, 8, 9.
	names := []string{"web-1", "web-2", "web-3"}
	results := make([]*agentclient.Result, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			args := map[string]any{"name": name, "region": "eu-central-1", "cpus": 1}
			result, err := session.Call(context.Background(), uint64(7+i), "provision-infra", args)
			if err != nil {
				fmt.Println("call failed:", err)
				return
			}
			results[i] = result
		})
	}
	wg.Wait()
	for i, result := range results {
		if result != nil {
			fmt.Println("step", 7+i, "status", result.Status, "replayed", result.Replayed)
		}
	}
	// Output:
	// step 7 status 201 replayed false
	// step 8 status 201 replayed false
	// step 9 status 201 replayed false
}

func ExampleResult_Decode() {
	session := agentclient.New(gatewayURL).Session("run-" + ulid.Make().String())
	result, err := session.Call(context.Background(), 0, "provision-infra", map[string]any{"name": "cache", "region": "us-west-2", "cpus": 2})
	if err != nil {
		fmt.Println("call failed:", err)
		return
	}
	var resource struct {
		Name     string `json:"name"`
		Region   string `json:"region"`
		MemoryGB int    `json:"memory_gb"`
		Status   string `json:"status"`
	}
	if err := result.Decode(&resource); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resource.Name, resource.Region, resource.MemoryGB, resource.Status)
	// Output:
	// cache us-west-2 4 provisioned
}

// A base URL without a scheme is a mistake no retry can fix: the first
// call returns it at once and sends nothing.
func ExampleNew() {
	client := agentclient.New("127.0.0.1:8080")
	_, err := client.Session("run-42").Call(context.Background(), 0, "echo", map[string]any{})
	fmt.Println(errors.Is(err, agentclient.ErrInvalidBaseURL))
	fmt.Println(err)
	// Output:
	// true
	// agentclient: invalid base URL "127.0.0.1:8080": it must start with http:// or https:// (for example "http://127.0.0.1:8080")
}

// The _meta of an MCP tools/call for step 3 of a session; with the go-sdk
// client it goes into mcp.CallToolParams.Meta.
func ExampleMCPMeta() {
	meta := agentclient.MCPMeta("run-01J8ZK4Q7XKZ3V9W6T2R5M0ABC", 3)
	text, _ := json.Marshal(meta)
	fmt.Println(string(text))
	// Output:
	// {"io.github.toolgateway/sessionId":"run-01J8ZK4Q7XKZ3V9W6T2R5M0ABC","io.github.toolgateway/stepIndex":3}
}

// With the derived key, which the gateway checks against the arguments it
// receives: the key of an MCP call is the key of the same REST call.
func ExampleMCPMetaWithKey() {
	args := map[string]any{"name": "db", "region": "eu-west-1", "cpus": 2}
	meta, err := agentclient.MCPMetaWithKey("run-01J8ZK4Q7XKZ3V9W6T2R5M0ABC", 3, "provision-infra", args)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(meta[wire.MetaIdempotencyKey])

	// The same call over REST sends the same Idempotency-Key.
	session := agentclient.New(gatewayURL).Session("run-01J8ZK4Q7XKZ3V9W6T2R5M0ABC-" + ulid.Make().String())
	rest, err := session.Call(context.Background(), 3, "provision-infra", args)
	if err != nil {
		fmt.Println(err)
		return
	}
	restMeta, _ := agentclient.MCPMetaWithKey(session.ID(), 3, "provision-infra", args)
	fmt.Println(rest.Key == restMeta[wire.MetaIdempotencyKey])
	// Output:
	// 621441d52967620244bb390b9d25654b8ada2dd7c6f55e26e1db2e7c8c53392a
	// true
}

// A Go runtime that speaks MCP: go-sdk's client calls the gateway's /mcp
// with the step's identity in _meta. The retry of the same step replays
// the first execution, and so does the same step over REST.
func ExampleMCPMeta_goSDK() {
	ctx := context.Background()
	sessionID := "run-" + ulid.Make().String()
	first, err := callOverMCP(ctx, gatewayURL+"/mcp", http.DefaultClient, sessionID, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	again, err := callOverMCP(ctx, gatewayURL+"/mcp", http.DefaultClient, sessionID, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	rest, err := agentclient.New(gatewayURL).Session(sessionID).Call(ctx, 3, "provision-infra",
		map[string]any{"cpus": 2, "name": "db", "region": "eu-west-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first replayed:", first.Meta[wire.MetaReplayed], "retry replayed:", again.Meta[wire.MetaReplayed])
	fmt.Println("same execution:", first.Meta[wire.MetaExecutionID] == again.Meta[wire.MetaExecutionID])
	fmt.Println("REST replays it:", rest.Replayed, rest.ExecutionID == first.Meta[wire.MetaExecutionID])
	// Output:
	// first replayed: false retry replayed: true
	// same execution: true
	// REST replays it: true true
}

// callOverMCP is docs/mcp.md's "A Go runtime" snippet: one call of step
// step over MCP, on its own client session.
func callOverMCP(ctx context.Context, endpoint string, httpClientWithBearerToken *http.Client, sessionID string, step uint64) (*mcp.CallToolResult, error) {
	transport := &mcp.StreamableClientTransport{
		Endpoint:   endpoint,                  // "https://gateway.example/mcp"
		HTTPClient: httpClientWithBearerToken, // adds Authorization
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "my-agent", Version: "1"}, nil)
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, err
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{
		Name:      "provision-infra",
		Arguments: map[string]any{"cpus": 2, "name": "db", "region": "eu-west-1"},
		Meta:      mcp.Meta(agentclient.MCPMeta(sessionID, step)),
	})
	if err != nil {
		return nil, err // a *jsonrpc.Error: data.code says why (the tables above)
	}
	if res.IsError {
		return nil, fmt.Errorf("provision-infra failed: %v", res.Content)
	}
	return res, nil
}
