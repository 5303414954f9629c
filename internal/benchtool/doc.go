// Package benchtool is the library behind cmd/gatewaybench: a tool that
// counts its executions in Redis (one round trip per call), the in-process
// servers a benchmark compares (gateway replicas, a plain chi baseline and
// a plain go-sdk MCP server serving the same tool), a go-redis hook
// counting store round trips, Redis CPU and command counters, and the load
// generator with its fresh, replay and dup modes over REST or raw JSON-RPC
// MCP; beside a target, an operator console polling its approvals
// (ConsolePoller) or the same gateway with receipts on (WaitReceipts);
// the "everything" profile's gateways with every feature on
// (everything.go) and the issuer of their callers' tokens (Issuer); and a
// sweep's medians over rounds as JSON, CSV, a text table and an SVG plot
// (Sweep).
package benchtool
