package main

import (
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/benchtool"
)

func TestAPIFlagMakesOneGatewayTargetPerAPI(t *testing.T) {
	apis, err := parseAPIs("rest, mcp")
	if err != nil {
		t.Fatal(err)
	}
	got := gatewayTargets(benchtool.Target{URLs: []string{"http://gw"}}, apis)
	if len(got) != 2 || got[0].Name != "gateway" || got[0].API != benchtool.APIREST ||
		got[1].Name != "gateway-mcp" || got[1].API != benchtool.APIMCP || got[1].URLs[0] != "http://gw" {
		t.Fatalf("targets %+v", got)
	}
	for _, bad := range []string{"grpc", "rest,rest", ""} {
		if _, err := parseAPIs(bad); err == nil {
			t.Errorf("-api %q accepted", bad)
		}
	}
	if mcpInProgressWait(0) >= 0 || mcpInProgressWait(3) != 3*time.Second {
		t.Errorf("-wait 0 -> %v, -wait 3 -> %v; want an immediate -32001 and 3s", mcpInProgressWait(0), mcpInProgressWait(3))
	}
}
