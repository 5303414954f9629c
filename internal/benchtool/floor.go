package benchtool

import (
	_ "embed"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// FloorName is the name of the exactly-once floor target.
const FloorName = "floor"

//go:embed floor_claim.lua
var floorClaimSource string

// floorClaim is the floor's one claim script (floor_claim.lua).
var floorClaim = redis.NewScript(floorClaimSource)

// Lifetimes of the floor's records: long enough for a run, short enough
// that a run that dies before its clean-up leaves nothing for long.
const (
	floorMarkerTTL = 30 * time.Second
	floorAnswerTTL = 10 * time.Minute
)

// FloorHandler is the minimal exactly-once server: the protocol's floor,
// what the gateway's REST call path is measured against. It makes exactly
// the store round trips a gateway call makes — one claim script (replay the
// stored answer, or mark the call in progress), the tool's own write, one
// SET of the answer — and nothing else: no key verification, canonical
// JSON, schema, tenants, lease renewal, fencing, step guard, metrics or
// logs. A replay is one round trip. Its records live under prefix in
// client's Redis.
func FloorHandler(client redis.UniversalClient, prefix string, tool tools.Tool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		key := r.Header.Get(wire.HeaderIdempotencyKey)
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBaselineBody))
		if err != nil || key == "" {
			http.Error(w, "unreadable body or no key", http.StatusBadRequest)
			return
		}
		recordKey := prefix + key
		found, err := floorClaim.Run(ctx, client, []string{recordKey}, floorMarkerTTL.Milliseconds()).Text()
		switch {
		case err == nil && found == "":
			w.Header().Set(wire.HeaderRetryAfter, "1")
			http.Error(w, "in progress", http.StatusConflict)
			return
		case err == nil:
			writeFloorAnswer(w, http.StatusOK, "true", []byte(found))
			return
		case !errors.Is(err, redis.Nil):
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		step, _ := strconv.ParseUint(r.Header.Get(wire.HeaderStepIndex), 10, 64)
		resp, err := tool.Call(ctx, &tools.Request{
			Arguments: body, Tenant: "anonymous", IdempotencyKey: key,
			SessionID: r.Header.Get(wire.HeaderSessionID), StepIndex: step, HasStep: true,
		})
		if err != nil {
			client.Del(ctx, recordKey) // released: a retry runs the tool again
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if err := client.Set(ctx, recordKey, resp.Body, floorAnswerTTL).Err(); err != nil {
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		writeFloorAnswer(w, resp.Status, "false", resp.Body)
	})
}

// writeFloorAnswer writes a JSON answer with the replay header the load
// tool reads.
func writeFloorAnswer(w http.ResponseWriter, status int, replayed string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", wire.MediaTypeJSON)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set(wire.HeaderReplayed, replayed)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
