package main

import (
	"context"
	"errors"
	"slices"

	"github.com/toolgateway/toolgateway/internal/benchtool"
)

// besideServers is what the in-process servers (here or in the child)
// serve for the targets -console-poll and -receipts add.
type besideServers struct {
	adminURLs   []string
	adminToken  string
	receiptURLs []string
	// receiptRoundTrips reads the store round trips of the gateways that
	// keep receipts; receiptCounts their receipt counters.
	receiptRoundTrips func() int64
	receiptCounts     func(context.Context) (benchtool.ReceiptCounts, error)
}

// besideTargets returns the targets the flags add next to the REST
// gateway gw, each compared with it: gateway+console (the same gateways,
// loaded the same way, while a console signed in on the admin listener
// polls) and gateway+receipts (gateways the same but for receipts on).
func besideTargets(f *flags, apis []benchtool.API, gw benchtool.Target, b besideServers) ([]benchtool.Target, error) {
	if f.consolePoll <= 0 && !f.receipts {
		return nil, nil
	}
	if !slices.Contains(apis, benchtool.APIREST) {
		return nil, errors.New("-console-poll and -receipts are compared with the REST gateway: add rest to -api")
	}
	var out []benchtool.Target
	gw.Name, gw.API, gw.Beside = gatewayName(benchtool.APIREST), benchtool.APIREST, gatewayName(benchtool.APIREST)
	gw.Profile = profileBare
	if f.consolePoll > 0 {
		if len(b.adminURLs) == 0 {
			return nil, errors.New("-console-poll: the servers serve no console")
		}
		poller, err := benchtool.NewConsolePoller(benchtool.ConsolePollConfig{AdminURL: b.adminURLs[0], AdminToken: b.adminToken,
			GatewayURL: gw.URLs[0], Pending: f.consolePending, Interval: f.consolePoll})
		if err != nil {
			return nil, err
		}
		t := gw
		t.Name, t.Companion, t.Profile = benchtool.ConsoleName, poller, profileBare+"+console"
		out = append(out, t)
	}
	if f.receipts {
		if len(b.receiptURLs) == 0 {
			return nil, errors.New("-receipts: the servers keep no receipts")
		}
		t := gw
		t.Name, t.URLs, t.Profile = benchtool.ReceiptsName, b.receiptURLs, profileBare+"+receipts"
		if t.RoundTrips != nil {
			t.RoundTrips = b.receiptRoundTrips
		}
		settleOnReceipts(&t, b.receiptCounts)
		out = append(out, t)
	}
	return out, nil
}

// settleOnReceipts makes each of t's runs end once its gateways' receipt
// writer has caught up (counts reads their counters), and count the
// receipts written.
func settleOnReceipts(t *benchtool.Target, counts func(context.Context) (benchtool.ReceiptCounts, error)) {
	t.Settle = func(ctx context.Context) error { return benchtool.WaitReceipts(ctx, counts) }
	t.Receipts = func(ctx context.Context) (int64, error) {
		c, err := counts(ctx)
		return c.Written, err
	}
}
