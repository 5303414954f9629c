package receipts

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"time"

	"github.com/gowebpki/jcs"
)

// Report is what [Verify] found: one entry per tenant, in tenant order.
// Its JSON form is what a machine-readable verify prints.
type Report struct {
	Tenants []TenantReport `json:"tenants"`
}

// OK reports whether every chain verified.
func (r Report) OK() bool {
	for _, t := range r.Tenants {
		if t.Failure != nil {
			return false
		}
	}
	return true
}

// TenantReport is one tenant's chain as [Verify] saw it.
type TenantReport struct {
	Tenant string `json:"tenant"`
	// Checked counts the receipts verified before the first failure (all
	// of them when the chain is whole).
	Checked int `json:"checked"`
	// First and Last are the seqs of the first and last receipt seen.
	First int64 `json:"first"`
	Last  int64 `json:"last"`
	// Anchor is the Prev of the first receipt when First > 1: the hash of
	// a receipt that retention removed, which this input cannot check (an
	// earlier export's head, or a checkpoint at First-1, can).
	Anchor string `json:"anchor,omitempty"`
	// Head is the hash of the last receipt seen: compare it with a head
	// recorded elsewhere to detect a chain rewritten and re-sealed.
	Head string `json:"head"`
	// Checkpoints counts the chain's signed checkpoints verified, and
	// Checkpointed is the highest seq one of them covers: the receipts up
	// to it are proven by the signing key, the ones after it only by the
	// chain.
	Checkpoints  int   `json:"checkpoints,omitempty"`
	Checkpointed int64 `json:"checkpointed,omitempty"`
	// Anchored counts the checkpoints whose RFC 3161 anchor verified, and
	// AnchoredAt is the latest time a TSA stamped.
	Anchored   int       `json:"anchored,omitempty"`
	AnchoredAt time.Time `json:"anchored_at,omitzero"`
	// Unanchored counts the checkpoints without an anchor, and
	// UnanchoredLast is the highest seq of one: with a TSA configured,
	// those it did not answer for (down, or refusing).
	Unanchored     int   `json:"unanchored,omitempty"`
	UnanchoredLast int64 `json:"unanchored_last,omitempty"`
	// Filtered: the export selected receipts by time, so receipts
	// missing before First or after Last were left out by the export,
	// not removed.
	Filtered bool `json:"filtered,omitempty"`
	// Failure is the first receipt found altered, removed or reordered;
	// nil when the chain verified.
	Failure *Failure `json:"failure,omitempty"`
}

// Problem classifies a [Failure].
type Problem string

// The problems [Verify] names.
const (
	// ProblemAltered: the receipt's hash is not the hash of its content.
	ProblemAltered Problem = "altered"
	// ProblemBrokenLink: the receipt's prev is not the previous receipt's
	// hash (the previous one was altered and re-sealed, or this one's prev
	// was edited), or a first receipt (seq 1) has a prev.
	ProblemBrokenLink Problem = "broken_link"
	// ProblemRemoved: the expected seq never appears.
	ProblemRemoved Problem = "removed"
	// ProblemReordered: the expected seq appears, but later in the input.
	ProblemReordered Problem = "reordered"
	// ProblemDuplicate: a seq appears twice.
	ProblemDuplicate Problem = "duplicate"
	// ProblemBackdated: the receipt is dated before its predecessor.
	ProblemBackdated Problem = "backdated"
	// ProblemForeign: a receipt (or checkpoint) of another tenant inside
	// this tenant's chain.
	ProblemForeign Problem = "foreign"
	// ProblemTruncated: the chain ends before a checkpoint's seq: its
	// newest receipts were removed.
	ProblemTruncated Problem = "truncated"
	// ProblemRewritten: the receipt at a checkpoint's seq is not the one
	// the checkpoint signed (the chain was rolled back and continued, or
	// re-sealed).
	ProblemRewritten Problem = "rewritten"
	// ProblemFork: two checkpoints sign different hashes for one seq.
	ProblemFork Problem = "fork"
	// ProblemBadSignature: a checkpoint whose signature does not verify.
	ProblemBadSignature Problem = "bad_signature"
	// ProblemBadAnchor: a checkpoint's RFC 3161 anchor does not verify:
	// not a token of this checkpoint, not signed by its certificate, or
	// (with TSA roots) from a TSA the verifier does not trust.
	ProblemBadAnchor Problem = "bad_anchor"
	// ProblemUnanchored: with [VerifyOptions.RequireAnchors], a
	// checkpoint without an anchor (its TSA did not answer, or the
	// anchor was removed).
	ProblemUnanchored Problem = "unanchored"
	// ProblemUnknownKey: a checkpoint signed by a key not among the
	// verifier's keys (none given, or a key never published).
	ProblemUnknownKey Problem = "unknown_key"
	// ProblemNotExpired: receipts are missing before the chain's first
	// one, which would be expiry, but a checkpoint says they are younger
	// than the retention.
	ProblemNotExpired Problem = "not_expired"
	// ProblemMissingChain: a checkpoint names the tenant, younger than
	// the retention, and the input has no receipt of its chain.
	ProblemMissingChain Problem = "missing_chain"
)

// Failure names the first bad receipt of a tenant's chain.
type Failure struct {
	Problem Problem `json:"problem"`
	// Seq is the seq the chain expected at that point: the receipt that
	// was altered, or the one removed or moved away; for a checkpoint's
	// problem, the checkpoint's seq.
	Seq int64 `json:"seq"`
	// Line is the input line where the chain broke (1-based).
	Line int `json:"line"`
	// Found is the seq of the receipt on Line.
	Found int64 `json:"found"`
	// FoundAtLine is, for ProblemReordered, the later line holding Seq.
	FoundAtLine int `json:"found_at_line,omitempty"`
	// Tenant is, for ProblemForeign, the tenant the receipt names.
	Tenant string `json:"tenant,omitempty"`
}

// String says what is wrong, starting with the problem's name.
func (f Failure) String() string {
	return string(f.Problem) + ": " + f.detail()
}

func (f Failure) detail() string {
	switch f.Problem {
	case ProblemAltered:
		return fmt.Sprintf("seq %d (line %d): its hash does not match its content", f.Seq, f.Line)
	case ProblemBrokenLink:
		return fmt.Sprintf("seq %d (line %d): prev does not match the previous receipt's hash", f.Seq, f.Line)
	case ProblemReordered:
		return fmt.Sprintf("seq %d expected at line %d (found seq %d), it is at line %d", f.Seq, f.Line, f.Found, f.FoundAtLine)
	case ProblemDuplicate:
		return fmt.Sprintf("seq %d (line %d) appears again", f.Found, f.Line)
	case ProblemBackdated:
		return fmt.Sprintf("seq %d (line %d) is dated before seq %d", f.Seq, f.Line, f.Seq-1)
	case ProblemForeign:
		return fmt.Sprintf("seq %d (line %d) belongs to tenant %q", f.Found, f.Line, f.Tenant)
	case ProblemTruncated:
		return fmt.Sprintf("the chain ends before seq %d, which the checkpoint %s signed: its newest receipts were removed", f.Seq, f.where())
	case ProblemRewritten:
		return fmt.Sprintf("seq %d is not the receipt the checkpoint %s signed (rolled back or re-sealed)", f.Seq, f.where())
	case ProblemFork:
		return fmt.Sprintf("the checkpoint %s signs another hash for seq %d than another one", f.where(), f.Seq)
	case ProblemBadSignature:
		return fmt.Sprintf("the checkpoint of seq %d %s: its signature does not verify", f.Seq, f.where())
	case ProblemBadAnchor:
		return fmt.Sprintf("the checkpoint of seq %d %s: its anchor (RFC 3161 time-stamp) does not verify", f.Seq, f.where())
	case ProblemUnanchored:
		return fmt.Sprintf("the checkpoint of seq %d %s has no anchor (RFC 3161 time-stamp), and anchors are required", f.Seq, f.where())
	case ProblemUnknownKey:
		return fmt.Sprintf("the checkpoint of seq %d %s is signed by a key not given (-keys)", f.Seq, f.where())
	case ProblemNotExpired:
		return fmt.Sprintf("the receipts up to seq %d are gone, but the checkpoint %s dates seq %d within the retention: removed, not expired", f.Seq, f.where(), f.Seq)
	case ProblemMissingChain:
		return fmt.Sprintf("the checkpoint %s signs seq %d within the retention, and the chain is missing", f.where(), f.Seq)
	default:
		return fmt.Sprintf("seq %d is missing: line %d holds seq %d", f.Seq, f.Line, f.Found)
	}
}

// where names the line of a checkpoint's failure: Line 0 is a checkpoint
// given apart from the input ([VerifyOptions.Outside]).
func (f Failure) where() string {
	if f.Line == 0 {
		return "kept outside (-checkpoints)"
	}
	return fmt.Sprintf("on line %d", f.Line)
}

// VerifyOptions are what [VerifyWith] checks checkpoints and expiry
// against.
type VerifyOptions struct {
	// Keys are the public keys checkpoints must be signed by; a
	// checkpoint by any other key fails the chain.
	Keys KeySet
	// Retention is receipts.retention (0: [DefaultRetention]): receipts
	// younger than it cannot have expired.
	Retention time.Duration
	// Now is when the verification runs (zero: time.Now()).
	Now time.Time
	// Outside are checkpoints kept apart from the store (an earlier
	// export's, copied to storage its operators cannot rewrite): checked
	// with the input's, so deleting a chain's checkpoints with its
	// receipts is caught too.
	Outside []Checkpoint
	// TSARoots are the CAs whose time-stamping authorities a checkpoint's
	// anchor may come from (nil: an anchor's signature and imprint are
	// checked, not who signed it).
	TSARoots *x509.CertPool
	// RequireAnchors fails a chain with a checkpoint that has no anchor
	// (ProblemUnanchored); without it such checkpoints are counted
	// ([TenantReport.Unanchored]).
	RequireAnchors bool
}

// Verify is [VerifyWith] without keys (a checkpoint fails its chain) and
// the default retention.
func Verify(r io.Reader) (Report, error) { return VerifyWith(r, VerifyOptions{}) }

// VerifyWith checks every tenant's chain in r: an export ([Export]),
// JSON lines of chain headers ({"chain": tenant}), receipts and
// checkpoints ({"checkpoint": {…}}), or receipts alone (an export of
// before checkpoints), of any number of tenants. Blank lines are
// skipped. Each tenant's receipts must appear in seq order, contiguous
// from the first one present: retention removes a chain's oldest
// receipts, so a chain may start at seq > 1, and that first receipt is
// its anchor (its prev is reported, and checked against a checkpoint of
// the seq before it). A chain starting at seq 1 must have an empty prev.
// After a chain header, every receipt and checkpoint until the next
// header belongs to that chain, whatever tenant it names.
//
// Checkpoints must be signed by one of opts.Keys, must not disagree for
// one seq, and must match the chain: a chain shorter than a checkpoint,
// a receipt other than the one a checkpoint signed, receipts missing
// before the first one although a checkpoint dates them within the
// retention, or a checkpointed tenant without a chain each fail it.
//
// A line that is not a strict JSON receipt, header or checkpoint (a
// duplicate member, members differing only by case, an unknown member, a
// non-canonical number) is an error naming the line. A broken chain is
// not an error: its [TenantReport.Failure] names the first problem, and
// VerifyWith goes on with other tenants.
func VerifyWith(r io.Reader, opts VerifyOptions) (Report, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	v := verifier{chains: map[string]*chainState{}, opts: opts}
	for _, c := range opts.Outside {
		chain := v.chain(c.Tenant)
		chain.checkpoints = append(chain.checkpoints, seenCheckpoint{Checkpoint: c})
	}
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		raw, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			if verr := v.line(line, raw); verr != nil {
				return Report{}, verr
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Report{}, fmt.Errorf("receipts: read line %d: %w", line, err)
		}
	}
	return v.report(), nil
}

// ChainHeader is an export's line before a chain: what follows, up to the
// next header, is that tenant's chain.
type ChainHeader struct {
	Chain string `json:"chain"`
	// Filtered: the export selected the chain's receipts by time.
	Filtered bool `json:"filtered,omitempty"`
}

// CheckpointLine is an export's line holding a checkpoint.
type CheckpointLine struct {
	Checkpoint Checkpoint `json:"checkpoint"`
}

// The schemas of an export's lines.
var (
	receiptSchema    = schemaOf(reflect.TypeFor[Receipt]())
	headerSchema     = schemaOf(reflect.TypeFor[ChainHeader]())
	checkpointSchema = schemaOf(reflect.TypeFor[CheckpointLine]())
)

// chainState is a tenant's chain while Verify reads.
type chainState struct {
	report  TenantReport
	started bool // a receipt was seen
	last    Head
	time    time.Time // of the last receipt
	// missing is the seq a failed chain expected; a later line holding it
	// turns "removed" into "reordered".
	missing int64
	// seen are the receipts verified, for the checkpoints.
	seen        map[int64]seenReceipt
	checkpoints []seenCheckpoint
}

type seenReceipt struct {
	hash string
	time time.Time
}

type seenCheckpoint struct {
	Checkpoint
	line int
}

type verifier struct {
	chains  map[string]*chainState
	opts    VerifyOptions
	current string // the chain of the last header ("": none)
}

func (v *verifier) chain(tenant string) *chainState {
	c, ok := v.chains[tenant]
	if !ok {
		c = &chainState{report: TenantReport{Tenant: tenant}, seen: map[int64]seenReceipt{}}
		v.chains[tenant] = c
	}
	return c
}

func (v *verifier) line(n int, raw []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return fmt.Errorf("receipts: line %d: not a JSON object: %w", n, err)
	}
	switch {
	case members["chain"] != nil:
		var h ChainHeader
		if err := decodeStrict(raw, headerSchema, &h); err != nil {
			return fmt.Errorf("receipts: line %d: chain header: %w", n, err)
		}
		v.current = h.Chain
		v.chain(h.Chain).report.Filtered = h.Filtered
		return nil
	case members["checkpoint"] != nil:
		var cl CheckpointLine
		if err := decodeStrict(raw, checkpointSchema, &cl); err != nil {
			return fmt.Errorf("receipts: line %d: checkpoint: %w", n, err)
		}
		v.checkpoint(n, cl.Checkpoint)
		return nil
	}
	r, contentHash, err := decodeLine(raw)
	if err != nil {
		return fmt.Errorf("receipts: line %d: %w", n, err)
	}
	name := r.Tenant
	if v.current != "" {
		name = v.current
	}
	c := v.chain(name)
	if !c.started {
		c.started = true
		c.report.First = r.Seq
		if r.Seq > 1 {
			c.report.Anchor = r.Prev
		}
		c.last = Head{Seq: r.Seq - 1, Hash: r.Prev}
	}
	if f := c.report.Failure; f != nil {
		if f.Problem == ProblemRemoved && r.Seq == c.missing {
			f.Problem, f.FoundAtLine = ProblemReordered, n
		}
		return nil
	}
	var fail *Failure
	if r.Tenant != name { // spliced in from another chain: named on this one
		fail = &Failure{Problem: ProblemForeign, Seq: c.last.Seq + 1, Line: n, Found: r.Seq, Tenant: r.Tenant}
	} else {
		fail = c.check(n, r, contentHash)
	}
	if fail != nil {
		c.report.Failure = fail
		c.missing = fail.Seq
		return nil
	}
	c.report.Checked++
	c.report.Last, c.report.Head = r.Seq, r.Hash
	c.last, c.time = HeadOf(r), r.Time
	c.seen[r.Seq] = seenReceipt{hash: r.Hash, time: r.Time}
	return nil
}

// checkpoint files c under the current chain (or its tenant's).
func (v *verifier) checkpoint(n int, c Checkpoint) {
	name := c.Tenant
	if v.current != "" {
		name = v.current
	}
	chain := v.chain(name)
	if c.Tenant != name && chain.report.Failure == nil {
		chain.report.Failure = &Failure{Problem: ProblemForeign, Seq: c.Seq, Line: n, Found: c.Seq, Tenant: c.Tenant}
		return
	}
	chain.checkpoints = append(chain.checkpoints, seenCheckpoint{Checkpoint: c, line: n})
}

// check is the chain rule for the receipt after c.last.
func (c *chainState) check(n int, r Receipt, contentHash string) *Failure {
	want := c.last.Seq + 1
	switch {
	case r.Seq == want && r.Hash != contentHash:
		return &Failure{Problem: ProblemAltered, Seq: want, Line: n, Found: r.Seq}
	case r.Seq == want && (r.Prev != c.last.Hash || (r.Seq == 1 && r.Prev != "")):
		return &Failure{Problem: ProblemBrokenLink, Seq: want, Line: n, Found: r.Seq}
	case r.Seq == want && c.report.Checked > 0 && r.Time.Before(c.time):
		return &Failure{Problem: ProblemBackdated, Seq: want, Line: n, Found: r.Seq}
	case r.Seq == want:
		return nil
	case r.Seq < want:
		return &Failure{Problem: ProblemDuplicate, Seq: want, Line: n, Found: r.Seq}
	default:
		return &Failure{Problem: ProblemRemoved, Seq: want, Line: n, Found: r.Seq}
	}
}

// finish checks c's checkpoints once every line was read: signatures,
// forks, then each against the chain, in seq order; the first problem is
// the chain's failure.
func (c *chainState) finish(opts VerifyOptions) {
	if c.report.Failure != nil || len(c.checkpoints) == 0 {
		return
	}
	sort.SliceStable(c.checkpoints, func(i, j int) bool { return c.checkpoints[i].Seq < c.checkpoints[j].Seq })
	fail := func(p Problem, cp seenCheckpoint, seq int64) {
		c.report.Failure = &Failure{Problem: p, Seq: seq, Line: cp.line, Found: cp.Seq}
	}
	signed := map[int64]string{}
	for _, cp := range c.checkpoints {
		if err := opts.Keys.Check(cp.Checkpoint); err != nil {
			problem := ProblemBadSignature
			if errors.Is(err, ErrUnknownKey) {
				problem = ProblemUnknownKey
			}
			fail(problem, cp, cp.Seq)
			return
		}
		if cp.Anchor == "" {
			if opts.RequireAnchors {
				fail(ProblemUnanchored, cp, cp.Seq)
				return
			}
			c.report.Unanchored++
			c.report.UnanchoredLast = max(c.report.UnanchoredLast, cp.Seq)
		}
		if cp.Anchor != "" {
			at, err := CheckAnchor(cp.Checkpoint, opts.TSARoots)
			if err != nil {
				fail(ProblemBadAnchor, cp, cp.Seq)
				return
			}
			c.report.Anchored++
			if at.After(c.report.AnchoredAt) {
				c.report.AnchoredAt = at
			}
		}
		if h, ok := signed[cp.Seq]; ok && h != cp.Hash {
			fail(ProblemFork, cp, cp.Seq)
			return
		}
		signed[cp.Seq] = cp.Hash
	}
	young := func(t time.Time) bool { return !t.Before(opts.Now.Add(-retentionOr(opts.Retention))) }
	filtered := c.report.Filtered
	if !c.started {
		if latest := c.checkpoints[len(c.checkpoints)-1]; !filtered && young(latest.Time) {
			fail(ProblemMissingChain, latest, latest.Seq)
		}
		return
	}
	for _, cp := range c.checkpoints {
		first := c.report.First
		switch {
		case cp.Seq > c.report.Last:
			if !filtered {
				fail(ProblemTruncated, cp, c.report.Last+1)
				return
			}
		case cp.Seq >= first:
			if got := c.seen[cp.Seq]; got.hash != cp.Hash || !got.time.Equal(cp.Time) {
				fail(ProblemRewritten, cp, cp.Seq)
				return
			}
		case cp.Seq == first-1 && cp.Hash != c.report.Anchor:
			fail(ProblemRewritten, cp, first)
			return
		case !filtered && young(cp.Time):
			fail(ProblemNotExpired, cp, cp.Seq)
			return
		}
		c.report.Checkpoints++
		c.report.Checkpointed = max(c.report.Checkpointed, min(cp.Seq, c.report.Last))
	}
}

// decodeStrict checks raw against s and decodes it into v.
func decodeStrict(raw []byte, s schema, v any) error {
	if err := checkStrict(raw, s); err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// decodeLine decodes one receipt, strictly, and computes the hash of its
// content: the JCS of the line's object without its hash member.
func decodeLine(raw []byte) (Receipt, string, error) {
	var r Receipt
	if err := decodeStrict(raw, receiptSchema, &r); err != nil {
		return r, "", fmt.Errorf("not a strict JSON receipt: %w", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return r, "", fmt.Errorf("not a JSON object: %w", err)
	}
	delete(members, "hash")
	rest, err := json.Marshal(members)
	if err != nil {
		return r, "", fmt.Errorf("re-encode: %w", err)
	}
	canonical, err := jcs.Transform(rest)
	if err != nil {
		return r, "", fmt.Errorf("canonicalize: %w", err)
	}
	return r, sha256Hex(canonical), nil
}

func (v *verifier) report() Report {
	var rep Report
	for _, c := range v.chains {
		c.finish(v.opts)
		rep.Tenants = append(rep.Tenants, c.report)
	}
	sort.Slice(rep.Tenants, func(i, j int) bool { return rep.Tenants[i].Tenant < rep.Tenants[j].Tenant })
	return rep
}
