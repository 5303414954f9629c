package main

import (
	"io"
	"strings"
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

func TestBesideTargetsNeedTheRESTGatewayAndTheServers(t *testing.T) {
	f, err := parseFlags([]string{"-console-poll", "1s", "-receipts"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	gw := benchtool.Target{URLs: []string{"http://gw"}}
	servers := besideServers{adminURLs: []string{"http://admin"}, adminToken: "t", receiptURLs: []string{"http://receipts"}}
	got, err := besideTargets(f, []benchtool.API{benchtool.APIREST, benchtool.APIMCP}, gw, servers)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != benchtool.ConsoleName || got[0].URLs[0] != "http://gw" || got[0].Companion == nil ||
		got[1].Name != benchtool.ReceiptsName || got[1].URLs[0] != "http://receipts" || got[1].Settle == nil ||
		got[0].Beside != "gateway" || got[1].Beside != "gateway" || got[0].API != benchtool.APIREST {
		t.Fatalf("targets %+v", got)
	}
	if _, err := besideTargets(f, []benchtool.API{benchtool.APIMCP}, gw, servers); err == nil {
		t.Error("-api mcp alone accepted: nothing to compare with")
	}
	if _, err := besideTargets(f, []benchtool.API{benchtool.APIREST}, gw, besideServers{}); err == nil {
		t.Error("accepted servers without a console or receipts")
	}
	none, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := besideTargets(none, []benchtool.API{benchtool.APIREST}, gw, besideServers{}); err != nil || len(got) != 0 {
		t.Errorf("default flags: %d targets, %v; want none, as before", len(got), err)
	}
	if _, err := parseFlags([]string{"-console-pending", "0"}, io.Discard); err == nil {
		t.Error("-console-pending 0 accepted")
	}
	if err := run(t.Context(), []string{"-url", "http://127.0.0.1:1", "-receipts", "-d", "1ms"}, io.Discard); err == nil {
		t.Error("-receipts with -url accepted")
	}
}

func TestProfilesAndConcurrencyLists(t *testing.T) {
	f, err := parseFlags([]string{"-profile", "bare,everything", "-c", "1, 10,50,200", "-api", "rest,mcp"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.workers) != 4 || f.workers[0] != 1 || f.workers[3] != 200 {
		t.Errorf("-c 1,10,50,200 read as %v", f.workers)
	}
	apis, _ := parseAPIs(f.apis)
	ev := everythingServers{urls: []string{"http://everything"}, tokens: []string{"tok"}, roundTrips: func() int64 { return 7 }}
	got := profileTargets(f, apis, benchtool.Target{URLs: []string{"http://gw"}, RoundTrips: func() int64 { return 1 }}, ev)
	var names []string
	for _, tg := range got {
		names = append(names, tg.Name+"@"+tg.URLs[0]+"/"+tg.Profile)
	}
	want := []string{"gateway@http://gw/bare", "gateway-mcp@http://gw/bare",
		benchtool.EverythingName + "@http://everything/everything", benchtool.EverythingMCPName + "@http://everything/everything"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("targets %v, want %v", names, want)
	}
	if e := got[2]; len(e.BearerTokens) != 1 || e.RoundTrips() != 7 || e.Settle == nil || e.Receipts == nil {
		t.Errorf("everything target: tokens %v, round trips from the everything gateways, settles on receipts: %+v", e.BearerTokens, e)
	}
	for _, bad := range [][]string{{"-c", "0"}, {"-c", "1,x"}, {"-profile", "all"}, {"-profile", "bare,bare"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if err := run(t.Context(), []string{"-url", "http://127.0.0.1:1", "-profile", "everything", "-d", "1ms"}, io.Discard); err == nil {
		t.Error("-profile everything with -url accepted")
	}
}
