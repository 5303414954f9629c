package agentclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"

	"github.com/toolgateway/toolgateway/agentclient"
)

// An agent calls step 4, then crashes before it checkpoints the result. The
// restarted runtime restores the session id and the pending step 4 from its
// checkpoint and sends the call again with a new client: the gateway replays
// the recorded outcome and the tool does not run a second time.
func Example_crashAndReplay() {
	gateway := newFakeGateway()
	server := httptest.NewServer(gateway)
	defer server.Close()
	ctx := context.Background()

	// Before the crash. The session id was minted when the run started.
	session := agentclient.New(server.URL).Session("run-01J8ZK4Q7XKZ3V9W6T2R5M0ABC")
	first, err := session.Call(ctx, 4, "provision-infra", map[string]any{"size": "m5.large", "region": "eu-west-1"})
	if err != nil {
		fmt.Println("call failed:", err)
		return
	}
	fmt.Println("first:  status", first.Status, "replayed", first.Replayed, string(first.Body))

	// ... the process dies here; the result never reached the checkpoint ...

	// After the restart: same session id, same step, same arguments (here as
	// the JSON text the checkpoint stored, with other member order).
	resumed := agentclient.New(server.URL).Session("run-01J8ZK4Q7XKZ3V9W6T2R5M0ABC")
	again, err := resumed.Call(ctx, 4, "provision-infra", json.RawMessage(`{"region": "eu-west-1", "size": "m5.large"}`))
	if err != nil {
		fmt.Println("call failed:", err)
		return
	}
	fmt.Println("replay: status", again.Status, "replayed", again.Replayed, string(again.Body))
	fmt.Println("same execution id:", again.ExecutionID == first.ExecutionID)
	fmt.Println("same key:", again.Key == first.Key)
	fmt.Println("tool executions:", gateway.Executions())
	// Output:
	// first:  status 201 replayed false {"instance":"i-1","state":"running"}
	// replay: status 201 replayed true {"instance":"i-1","state":"running"}
	// same execution id: true
	// same key: true
	// tool executions: 1
}

// Parallel tool calls of one model turn take distinct step indices, so each
// runs once and each is replayed on its own.
func ExampleSession_Call() {
	gateway := newFakeGateway()
	server := httptest.NewServer(gateway)
	defer server.Close()

	session := agentclient.New(server.URL).Session("run-42")
	// The model's turn asked for three instances; steps 7, 8 and 9.
	for step, size := range map[uint64]string{7: "small", 8: "medium", 9: "large"} {
		if _, err := session.Call(context.Background(), step, "provision-infra", map[string]string{"size": size}); err != nil {
			fmt.Println("call failed:", err)
			return
		}
	}
	fmt.Println("tool executions:", gateway.Executions())
	// Output:
	// tool executions: 3
}

func ExampleResult_Decode() {
	server := httptest.NewServer(newFakeGateway())
	defer server.Close()

	result, err := agentclient.New(server.URL).Session("run-42").Call(context.Background(), 0, "provision-infra", map[string]string{"size": "small"})
	if err != nil {
		fmt.Println("call failed:", err)
		return
	}
	var instance struct {
		Instance string `json:"instance"`
		State    string `json:"state"`
	}
	if err := result.Decode(&instance); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(instance.Instance, instance.State)
	// Output:
	// i-1 running
}
