package redisstore

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// A List call's work is bounded: at most listRounds SCAN calls of
// COUNT max(limit, listMinCount) on one node, and one pipelined read of
// the records they matched. A page may therefore hold fewer records than
// the limit, even none, and still have a cursor (idempotency.Page).
const (
	listRounds   = 8
	listMinCount = 100
	// findCount is FindExecution's SCAN COUNT per round trip.
	findCount = 1000
	// headerRead is how much of a record value FindExecution reads: state,
	// fingerprint and execution id (each at most 1 + 255 bytes).
	headerRead = 1 + 2*256
)

// listCursor is where a listing continues: the key layout being scanned
// (0: records, 1: the previous layout's), the node (index into the
// masters sorted by address), the node's SCAN cursor, and — when the
// previous page ended at its limit inside the SCAN batch at that cursor —
// short hashes of the record names of that batch it already returned.
// Resuming re-reads the batch at the same cursor and skips those: a count
// would not do, as the batch can change between calls (the keyspace
// rehashes under writes).
type listCursor struct {
	phase, node int
	scan        uint64
	seen        []uint64
}

func (c listCursor) String() string {
	b := make([]byte, 8*len(c.seen))
	for i, h := range c.seen {
		binary.BigEndian.PutUint64(b[8*i:], h)
	}
	return fmt.Sprintf("%d.%d.%d.%s", c.phase, c.node, c.scan, base64.RawURLEncoding.EncodeToString(b))
}

func parseCursor(s string) (listCursor, error) {
	var c listCursor
	if s == "" {
		return c, nil
	}
	bad := fmt.Errorf("redisstore: list: cursor %q is not one this store returned: %w", s, idempotency.ErrInvalidCursor)
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return listCursor{}, bad
	}
	var err1, err2, err3 error
	c.phase, err1 = strconv.Atoi(parts[0])
	c.node, err2 = strconv.Atoi(parts[1])
	c.scan, err3 = strconv.ParseUint(parts[2], 10, 64)
	seen, err4 := base64.RawURLEncoding.DecodeString(parts[3])
	if err := errors.Join(err1, err2, err3, err4); err != nil || c.phase < 0 || c.node < 0 || len(seen)%8 != 0 {
		return listCursor{}, bad
	}
	for i := 0; i < len(seen); i += 8 {
		c.seen = append(c.seen, binary.BigEndian.Uint64(seen[i:]))
	}
	return c, nil
}

// nameHash is the short hash of a record name a cursor remembers.
func nameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// List returns the records matching filter, one bounded page at a time,
// in SCAN order (Redis keeps no time order). On a cluster the cursor
// walks the masters one after the other. Like SCAN, a listing returns
// every record that lives throughout it, and may return one twice when
// the keyspace is resized under it.
func (s *Store) List(ctx context.Context, filter idempotency.ListFilter) (idempotency.Page, error) {
	if filter.Limit < 1 || filter.Limit > idempotency.MaxListLimit {
		return idempotency.Page{}, fmt.Errorf("redisstore: list: limit %d not in 1…%d", filter.Limit, idempotency.MaxListLimit)
	}
	if filter.SessionID != "" && filter.Tenant == "" {
		return idempotency.Page{}, fmt.Errorf("redisstore: list: a session filter needs its tenant: %w", idempotency.ErrInvalidCursor)
	}
	switch filter.State {
	case "", idempotency.StateInProgress, idempotency.StateCompleted, idempotency.StateUnknown,
		idempotency.StateAwaitingApproval, idempotency.StateApproved, idempotency.StateDenied, idempotency.StateExpired:
	default:
		return idempotency.Page{}, fmt.Errorf("redisstore: list: unknown state %q: %w", filter.State, idempotency.ErrInvalidCursor)
	}
	cur, err := parseCursor(filter.Cursor)
	if err != nil {
		return idempotency.Page{}, err
	}
	if err := s.ready(ctx); err != nil {
		return idempotency.Page{}, fmt.Errorf("redisstore: list: %w", err)
	}
	nodes, err := s.scanNodes(ctx)
	if err != nil {
		return idempotency.Page{}, fmt.Errorf("redisstore: list: %w", err)
	}
	const phases = 1 // the cursor's phase field is kept for cursors already handed out
	count := int64(max(filter.Limit, listMinCount))
	var page []idempotency.Record
	for range listRounds {
		if cur.phase >= phases || cur.node >= len(nodes) {
			return idempotency.Page{Records: page}, nil
		}
		node := nodes[cur.node]
		names, next, err := node.Scan(ctx, cur.scan, s.listPattern(filter), count).Result()
		if err != nil {
			return idempotency.Page{}, fmt.Errorf("redisstore: list: scan: %w", err)
		}
		loaded, err := s.load(ctx, node, names, false)
		if err != nil {
			return idempotency.Page{}, fmt.Errorf("redisstore: list: %w", err)
		}
		var match []foundRecord
		for _, f := range loaded {
			if filter.Matches(f.record) && !slices.Contains(cur.seen, nameHash(f.key)) {
				match = append(match, f)
			}
		}
		if room := filter.Limit - len(page); len(match) > room {
			for _, f := range match[:room] {
				page = append(page, f.record)
				cur.seen = append(cur.seen, nameHash(f.key))
			}
			return idempotency.Page{Records: page, Cursor: cur.String()}, nil
		}
		for _, f := range match {
			page = append(page, f.record)
		}
		cur.seen, cur.scan = nil, next
		if next == 0 {
			cur.node++
			if cur.node == len(nodes) {
				cur.node, cur.phase = 0, cur.phase+1
			}
		}
		if len(page) == filter.Limit {
			break
		}
	}
	if cur.phase >= phases {
		return idempotency.Page{Records: page}, nil
	}
	return idempotency.Page{Records: page, Cursor: cur.String()}, nil
}

// listPattern narrows a listing's SCAN on the server: with a tenant (and a
// tool) the record names share a prefix after "R" (and, on a cluster, the
// tag).
func (s *Store) listPattern(filter idempotency.ListFilter) string {
	if filter.Tenant == "" {
		return s.keys.recordPattern()
	}
	return s.keys.recordPatternHead() + globEscape(string(appendScopeHead(nil, filter.Tenant, filter.Tool))) + "*"
}

// scanNodes returns the nodes a listing walks: the single Redis, or the
// cluster's masters sorted by address (so a cursor's node index means the
// same node from one call to the next while the topology holds).
func (s *Store) scanNodes(ctx context.Context) ([]*redis.Client, error) {
	switch c := s.client.(type) {
	case *redis.Client:
		return []*redis.Client{c}, nil
	case *redis.ClusterClient:
		var mu sync.Mutex
		var nodes []*redis.Client
		if err := c.ForEachMaster(ctx, func(_ context.Context, node *redis.Client) error {
			mu.Lock()
			nodes = append(nodes, node)
			mu.Unlock()
			return nil
		}); err != nil {
			return nil, fmt.Errorf("cluster masters: %w", err)
		}
		slices.SortFunc(nodes, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
		return nodes, nil
	}
	return nil, fmt.Errorf("listing needs a single-node or cluster client, not %T", s.client)
}

// FindExecution returns the record whose execution id is id. Redis keeps
// no index by execution id (an index entry per call would cost memory on
// every call for a rare operator lookup), so this walks every record of
// every master: SCAN in batches of findCount, reading only each record's
// first headerRead bytes (GETRANGE) — O(records) work on the server, in
// bounded steps. See docs/idempotency.md for the cost.
func (s *Store) FindExecution(ctx context.Context, executionID string) (idempotency.Record, error) {
	if err := s.ready(ctx); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: find execution: %w", err)
	}
	nodes, err := s.scanNodes(ctx)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: find execution: %w", err)
	}
	want := packID(executionID)
	pattern := s.keys.recordPattern()
	for _, node := range nodes {
		var cursor uint64
		for {
			names, next, err := node.Scan(ctx, cursor, pattern, findCount).Result()
			if err != nil {
				return idempotency.Record{}, fmt.Errorf("redisstore: find execution: scan: %w", err)
			}
			name, err := s.findIn(ctx, node, names, want)
			if err != nil {
				return idempotency.Record{}, fmt.Errorf("redisstore: find execution: %w", err)
			}
			if name != "" {
				loaded, err := s.load(ctx, node, []string{name}, true)
				if err != nil {
					return idempotency.Record{}, fmt.Errorf("redisstore: find execution: %w", err)
				}
				if len(loaded) == 1 && loaded[0].record.ExecutionID == executionID {
					return loaded[0].record, nil
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return idempotency.Record{}, idempotency.ErrNotFound
}

// findIn returns the name among names whose record has the execution id
// (packed: want), or "".
func (s *Store) findIn(ctx context.Context, node *redis.Client, names []string, want string) (string, error) {
	if len(names) == 0 {
		return "", nil
	}
	cmds := make([]*redis.StringCmd, len(names))
	if _, err := node.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, name := range names {
			cmds[i] = pipe.GetRange(ctx, name, 0, headerRead-1)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	for i, cmd := range cmds {
		r := &reader{b: []byte(cmd.Val())}
		r.u8()
		r.str(r.u8())
		if exec := r.str(r.u8()); r.err == nil && exec == want {
			return names[i], nil
		}
	}
	return "", nil
}
