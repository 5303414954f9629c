package gateway_test

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// TestBudgetsOnRedisCluster runs the budget proofs on a real three-master
// Redis Cluster, where each budget bucket is a slot of its own apart from
// the records' and a reservation takes steps (docs/budgets.md, "Redis
// Cluster"): 64 refunds from 3 replicas racing for 1 000 pay at most
// 1 000 at the upstream, every refusal budget_exceeded
// (TestBudgetRaceAcrossReplicas); an UNKNOWN refund stays held, a refund
// refused as not executed and the operator's delete release, a resolve
// commits, a replay charges nothing (TestBudgetSettles); the operator's
// resolve and delete leave budget_committed and budget_released receipts
// (TestBudgetSettlementReceipts); each window of a rollover race lets
// exactly its limit through (TestBudgetWindowRollover).
func TestBudgetsOnRedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client()
	t.Cleanup(func() { _ = client.Close() })
	t.Run("race", func(t *testing.T) {
		budgetRace(t, gatewaytest.Redis, redisstore.New(client, redisstore.Options{Prefix: redistest.Prefix("budrace")}))
	})
	t.Run("settles", func(t *testing.T) {
		budgetSettles(t, gatewaytest.Redis, withStore(redisstore.New(client, redisstore.Options{Prefix: redistest.Prefix("budsettle")})))
	})
	t.Run("window rollover", func(t *testing.T) {
		budgetWindowRollover(t, redisstore.New(client, redisstore.Options{Prefix: redistest.Prefix("budroll")}))
	})
	t.Run("settlement receipts", func(t *testing.T) {
		budgetSettlementReceipts(t, gatewaytest.Redis, redisstore.New(client, redisstore.Options{Prefix: redistest.Prefix("budreceipts")}))
	})
}
