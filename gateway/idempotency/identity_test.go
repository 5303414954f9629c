package idempotency_test

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// TestIdentityOfRecord: the identity a store kept wins; without one the
// session says what it can (a host call id, else the gateway's own), and
// a kept identity that is not one is ignored.
func TestIdentityOfRecord(t *testing.T) {
	kept := `{"kind":"host","host_meta":"claudecode/toolUseId","host_call_id":"toolu_01"}`
	cases := []struct {
		rec  idempotency.Record
		want string
	}{
		{idempotency.Record{Identity: kept, Step: &idempotency.Step{SessionID: "host:abc"}}, "host claudecode/toolUseId=toolu_01"},
		{idempotency.Record{Step: &idempotency.Step{SessionID: "host:abc"}}, "host"},
		{idempotency.Record{Step: &idempotency.Step{SessionID: "run-7", Index: 3}}, "gateway"},
		{idempotency.Record{}, "gateway"},
		{idempotency.Record{Identity: `{"kind":""}`, Step: &idempotency.Step{SessionID: "host:p"}}, "host"},
		{idempotency.Record{Identity: `not json`}, "gateway"},
		{idempotency.Record{Identity: `{"kind":"fingerprint","principal":"p","window_start":"2026-12-07T00:00:00Z","window":"1h0m0s"}`},
			"fingerprint p (window 1h0m0s from 2026-12-07T00:00:00Z)"},
	}
	for _, c := range cases {
		if got := idempotency.IdentityOfRecord(c.rec).String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.rec, got, c.want)
		}
	}
}
