// Package benchtool is the library behind cmd/gatewaybench: a tool that
// counts its executions in Redis (one round trip per call), the in-process
// servers a benchmark compares (gateway replicas and a plain chi baseline
// serving the same tool), a go-redis hook counting store round trips, and
// the load generator with its fresh, replay and dup modes.
package benchtool
