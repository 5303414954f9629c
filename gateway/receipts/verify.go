package receipts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

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
	// earlier export's head can).
	Anchor string `json:"anchor,omitempty"`
	// Head is the hash of the last receipt seen: compare it with a head
	// recorded elsewhere to detect a chain rewritten and re-sealed.
	Head string `json:"head"`
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
)

// Failure names the first bad receipt of a tenant's chain.
type Failure struct {
	Problem Problem `json:"problem"`
	// Seq is the seq the chain expected at that point: the receipt that
	// was altered, or the one removed or moved away.
	Seq int64 `json:"seq"`
	// Line is the input line where the chain broke (1-based).
	Line int `json:"line"`
	// Found is the seq of the receipt on Line.
	Found int64 `json:"found"`
	// FoundAtLine is, for ProblemReordered, the later line holding Seq.
	FoundAtLine int `json:"found_at_line,omitempty"`
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
	default:
		return fmt.Sprintf("seq %d is missing: line %d holds seq %d", f.Seq, f.Line, f.Found)
	}
}

// Verify checks every tenant's chain in r, JSON lines of receipts of any
// number of tenants (blank lines are skipped). Each tenant's receipts must
// appear in seq order, contiguous from the first one present: retention
// removes a chain's oldest receipts, so a chain may start at seq > 1, and
// that first receipt is its anchor (its prev is reported, not checked). A
// chain starting at seq 1 must have an empty prev.
//
// A line that is not a JSON receipt is an error naming the line. A broken
// chain is not an error: its [TenantReport.Failure] names the first receipt
// altered, removed or reordered, and Verify goes on with other tenants.
func Verify(r io.Reader) (Report, error) {
	v := verifier{chains: map[string]*chainState{}}
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

// chainState is a tenant's chain while Verify reads.
type chainState struct {
	report TenantReport
	last   Head
	// missing is the seq a failed chain expected; a later line holding it
	// turns "removed" into "reordered".
	missing int64
}

type verifier struct {
	chains map[string]*chainState
}

func (v *verifier) line(n int, raw []byte) error {
	r, contentHash, err := decodeLine(raw)
	if err != nil {
		return fmt.Errorf("receipts: line %d: %w", n, err)
	}
	c, seen := v.chains[r.Tenant]
	if !seen {
		c = &chainState{report: TenantReport{Tenant: r.Tenant, First: r.Seq}}
		v.chains[r.Tenant] = c
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
	if fail := c.check(n, r, contentHash); fail != nil {
		c.report.Failure = fail
		c.missing = fail.Seq
		return nil
	}
	c.report.Checked++
	c.report.Last, c.report.Head = r.Seq, r.Hash
	c.last = HeadOf(r)
	return nil
}

// check is the chain rule for the receipt after c.last.
func (c *chainState) check(n int, r Receipt, contentHash string) *Failure {
	want := c.last.Seq + 1
	switch {
	case r.Seq == want && r.Hash != contentHash:
		return &Failure{Problem: ProblemAltered, Seq: want, Line: n, Found: r.Seq}
	case r.Seq == want && (r.Prev != c.last.Hash || (r.Seq == 1 && r.Prev != "")):
		return &Failure{Problem: ProblemBrokenLink, Seq: want, Line: n, Found: r.Seq}
	case r.Seq == want:
		return nil
	case r.Seq < want:
		return &Failure{Problem: ProblemDuplicate, Seq: want, Line: n, Found: r.Seq}
	default:
		return &Failure{Problem: ProblemRemoved, Seq: want, Line: n, Found: r.Seq}
	}
}

// decodeLine decodes one receipt and computes the hash of its content: the
// JCS of the line's object without its hash member, so a member added to
// a stored receipt breaks its hash too.
func decodeLine(raw []byte) (Receipt, string, error) {
	var r Receipt
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, "", fmt.Errorf("not a JSON receipt: %w", err)
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
		rep.Tenants = append(rep.Tenants, c.report)
	}
	sort.Slice(rep.Tenants, func(i, j int) bool { return rep.Tenants[i].Tenant < rep.Tenants[j].Tenant })
	return rep
}
