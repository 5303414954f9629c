package redisstore

import (
	"encoding/binary"
	"strings"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// layoutKept starts a kept-arguments key: the record's creation time
// (µs); the canonical arguments are the rest.
const layoutKept = ">I8"

// keptArguments names the key that keeps a COMPLETED record's canonical
// arguments when its lease asked for them (Lease.KeepArguments): the
// record's name with its "R" turned "G", so on a cluster it shares the
// record's slot. complete.lua writes it in the completion's atomic step
// with the record's TTL, delete.lua removes it with the record; the
// record's own packed layout does not change. Its value is layoutKept.
func (k keyLayout) keptArguments(recordKey string) string {
	return k.prefix + "G" + strings.TrimPrefix(recordKey, k.prefix+"R")
}

// applyKeptArguments puts the arguments kept in raw on rec, a COMPLETED
// record that carries none, when raw belongs to this record (the same
// creation time), so a value left by an earlier record of the same name
// is never taken for this one's.
func applyKeptArguments(rec *idempotency.Record, raw string) {
	if rec.State != idempotency.StateCompleted || rec.CanonicalArguments != nil || len(raw) < 8 {
		return
	}
	if int64(binary.BigEndian.Uint64([]byte(raw[:8]))) != rec.CreatedAt.UnixMicro() {
		return
	}
	rec.CanonicalArguments = []byte(raw[8:])
}
